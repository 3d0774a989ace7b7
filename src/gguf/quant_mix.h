// Quantization targets: llama.cpp's named file types ("mixes": q4_k_m, iq2_xxs, ...) and the
// per-tensor type choices its quantizer makes for them, so that `tarmac gguf quantize --type
// q4_k_m` writes the tensor types llama-quantize would write for the same model.
//
// A target is either a llama.cpp file type (llama_ftype: q4_k_m, q6_k, q8_0, f16, ...) whose
// rules pick some tensors' types (output, attn_v, ffn_down, ... get more bits), or a plain
// tensor type llama.cpp has no file type of (q3_k, q4_k, q5_k, mxfp4), written everywhere.
// A name that is both a tensor type and a file type (q2_k, q6_k, iq4_xs, iq2_xxs, tq1_0, ...)
// is the file type, as in llama-quantize: e.g. iq2_s is the IQ2_S mix, whose base tensor type
// is iq2_xs. `pure` turns the rules off: the base type wherever its blocks fit.
//
// Choosing a tensor's type, in this order:
//  1. 1-D tensors (norms, biases, rope factors) are stored as F32;
//  2. tensors llama.cpp never quantizes (not a *.weight, norms, expert routers, ...) keep their
//     type;
//  3. a mix that is not pure and whose base type is quantized applies its rules (MixPlanner);
//  4. the block-size fallback of PlanTensorType (gguf/quantize_file.h) where the chosen type's
//     block does not divide the row.
// Some rules count tensors (the i-th attn_v, the i-th ffn_down), so the planner is stateful:
// it must see the tensors in the order llama.cpp's quantizer visits them (LlamaVisitOrder;
// PlanTensorTypes does this).
//
// Not modelled: llama.cpp's importance matrix (tarmac has none: ModelFacts::has_imatrix stays
// false unless a caller sets it; the mixes that store tensors as iq1_*, iq2_* or iq3_xxs, and
// q2_k_s's q2_K tensors, which llama-quantize refuses to write without one, are written from
// the reference quantizers anyway), and --output-tensor-type / --token-embedding-type /
// --tensor-type overrides.
//
// Plain values and a single-threaded planner object; the tables are immutable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace tarmac::gguf {

class File;

struct QuantTarget {
  std::string name;           // lower case, as given: "q4_k_m", "q4_k", "f16"
  DType base = DType::kF16;   // the mix's default tensor type (llama_ftype_get_default_type)
  uint32_t file_type = 1;     // general.file_type: llama.cpp's llama_ftype value
  bool mix = false;           // a llama.cpp file type: its rules choose some tensors' types
  bool pure = false;          // rules off: base everywhere it fits (llama-quantize --pure)

  QuantTarget() = default;
  // One tensor type everywhere: a plain (pure) target whose file type is LlamaFileType(type).
  // Implicit so that callers writing a single type pass the DType itself; a type outside
  // IsWeightTargetType makes a target QuantizeFile / MakeRandomModel refuse.
  QuantTarget(DType type);  // NOLINT(google-explicit-constructor)

  // True when the mix's per-tensor rules run (a mix, not pure, quantized base type).
  bool uses_rules() const;
  // "q4_k_m", or "q4_k_m (pure)".
  std::string ToString() const;
};

// Case-insensitive. A llama.cpp file type name means the file type (also when it is a tensor
// type's name, see above); otherwise a tensor type name IsWeightTargetType accepts. `pure`
// is recorded in the result. InvalidArgument listing the valid names otherwise.
Result<QuantTarget> ParseQuantTarget(std::string_view name, bool pure = false);

// "f32, f16, bf16, q4_0, ..., q4_k_m, ..., mxfp4_moe; tensor types: q3_k, q4_k, q5_k, mxfp4".
std::string QuantTargetNames();

// What the rules need to know about the model (llama.cpp reads them from its hparams).
struct ModelFacts {
  std::string arch;       // general.architecture
  int64_t n_layer = 0;    // <arch>.block_count
  int64_t n_head = 0;     // <arch>.attention.head_count (layer 0's if per layer)
  int64_t n_head_kv = 0;  // <arch>.attention.head_count_kv (n_head when absent)
  int64_t n_expert = 0;   // <arch>.expert_count (0 when absent)
  bool has_output = true;    // output.weight exists (false: tied to token_embd)
  int n_attention_wv = 0;    // tensors of the attn_v kind (attn_v, attn_qkv, attn_kv_b)
  bool has_imatrix = false;  // an importance matrix is given (never, in tarmac)

  // n_head / n_head_kv, 0 when n_head_kv is 0 (llama.cpp's n_gqa()).
  int64_t n_gqa() const { return n_head_kv == 0 ? 0 : n_head / n_head_kv; }
  // llama.cpp's LLM_TYPE_70B as its quantizer infers it: llama with 80 layers and GQA.
  bool is_llama_70b() const { return arch == "llama" && n_layer == 80 && n_head != n_head_kv; }
  // Sets has_output and n_attention_wv from the names of every tensor of the file.
  void CountTensors(std::span<const std::string> names);
};

// The facts of a GGUF model file. Missing keys are tolerated (a file may hold any tensors):
// block_count defaults to 1 + the highest blk.N in a tensor name, heads to 0. InvalidArgument
// for a key of the wrong type.
Result<ModelFacts> ReadModelFacts(const File& file);

// The tensor being planned: its name, GGUF dims (dims[0] = row length) and current type (the
// type kept where llama.cpp does not quantize; F32 for generated tensors).
struct TensorDesc {
  std::string_view name;
  std::span<const int64_t> dims;
  DType type = DType::kF32;
};

struct TensorPlan {
  DType type = DType::kF32;
  std::string rule;      // the mix's rule that moved the tensor off the base type; or empty
  std::string fallback;  // PlanTensorType's note when the chosen type's block did not fit
  // Why `type` is not the target's base type: rule and fallback joined; empty if neither.
  std::string Note() const;
};

// Whether llama.cpp's quantizer converts this tensor at all (2+ dims, a *.weight that is not a
// norm, an expert router, a positional/token-type embedding or one of a few small special
// matrices).
bool AllowsQuantization(std::string_view name, int num_dims);

// Chooses tensor types for one file. Not thread-safe; one object per file.
class MixPlanner {
 public:
  MixPlanner(QuantTarget target, ModelFacts facts);
  // The next tensor, in LlamaVisitOrder. InvalidArgument for an MoE tensor whose layer
  // cannot be read from its name (blk.N.) or is out of range.
  Result<TensorPlan> Next(const TensorDesc& t);

 private:
  // The mix's choice for a quantizable tensor; *why names the rule when it is not the base.
  Result<DType> Choose(const TensorDesc& t, std::string* why);
  // The layer a counted rule applies to: the counter, or for an MoE model blk.N of the name.
  Result<int> LayerOf(std::string_view name, int counter) const;

  QuantTarget target_;
  ModelFacts facts_;
  int i_attention_wv_ = 0;
  int i_ffn_down_ = 0;
  int i_ffn_gate_ = 0;
  int i_ffn_up_ = 0;
};

// The order llama.cpp's quantizer visits tensors in: by block number (tensors outside blocks
// first), then by name. Returns indices into `names`.
std::vector<size_t> LlamaVisitOrder(std::span<const std::string> names);

// Plans every tensor of a file: result[i] is tensors[i]'s, the planner having visited them in
// LlamaVisitOrder. `facts` must have had CountTensors over the same names.
Result<std::vector<TensorPlan>> PlanTensorTypes(const QuantTarget& target, const ModelFacts& facts,
                                                std::span<const TensorDesc> tensors);

}  // namespace tarmac::gguf
