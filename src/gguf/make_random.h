// Random-weight GGUF models of any shape and of each family in gguf/random_families.h (llama,
// qwen2, qwen3, gemma2, gemma3, phi3), for benchmarks, load tests and compatibility checks with
// other GGUF readers (llama.cpp loads what this writes).
//
// The file mirrors what llama.cpp's converter writes for the family: general.* and <arch>.*
// hyper-parameter keys, and tensors token_embd, output_norm, output (absent when tied),
// blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}
// plus the family's own (biases, attn_q_norm/attn_k_norm, post_attention_norm/post_ffw_norm,
// fused attn_qkv and gate+up ffn_up, rope_factors_long/short). The vocabulary is a GPT-2
// style byte-level BPE (tokenizer.ggml.* with model "gpt2" / pre "gpt-2"), or the tokenizer.*
// keys of another GGUF file (a real vocabulary: options.vocab_from).
// Weights are zero-mean with standard deviation 0.02 (an Irwin-Hall sum of 4 uniforms: cheap,
// bounded at +-3.5 sigma), biases too, norms are 1 (+ options.norm_jitter noise). Every row
// has its own RNG stream derived from (seed, tensor name, row), so the output is bit-identical
// for any thread count. Tensors are generated and quantized while being written (one tensor in
// memory at a time).
//
// Thread-safety: reentrant; the ThreadPool is used by the calling thread only during the call.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/model_presets.h"
#include "gguf/quant_mix.h"
#include "tensor/dtype.h"

namespace tarmac::gguf {

// A byte-level BPE vocabulary of exactly `size` tokens (size >= 257): ids 0..255 are the 256
// bytes in GPT-2's byte-to-unicode spelling (so no token holds a literal space: ' ' is "Ġ"),
// then merged tokens "Ġa".."zz", "Ġaa".. built one character at a time, each with the merge
// "<prefix> <last char>" whose both sides are earlier tokens, and last "<|endoftext|>"
// (control, used as bos and eos).
struct ByteLevelVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 3 control (llama.cpp's token type values)
  std::vector<std::string> merges;   // size - 257 merges in rank order
  int32_t eos_id = 0;
};
// Preconditions: 257 <= size <= 2^22.
ByteLevelVocab MakeByteLevelVocab(int64_t size);


struct MakeRandomOptions {
  uint64_t seed = 0;
  // A GGUF file whose tokenizer.* keys become this model's vocabulary (its token count
  // replaces the shape's vocab); empty: the synthetic byte-level BPE of MakeByteLevelVocab.
  std::string vocab_from;
  // Norm weights 1 + norm_jitter · u with u random in [-1, 1] (0: exactly 1), so that tests
  // see which norm a reader applies where. In [0, 1).
  double norm_jitter = 0.0;
  // Called after each tensor is generated and written, with its name, type, index, count.
  std::function<void(const std::string& name, DType type, size_t index, size_t count)> on_tensor;
};

struct MakeRandomSummary {
  size_t tensors = 0;
  int64_t parameters = 0;
  uint64_t tensor_bytes = 0;
  std::vector<std::string> notes;  // type fallbacks (see PlanTensorType)
  int mixed = 0;                   // tensors the target's mix rules stored in another type
};

// Writes the model to `out` atomically (no partial file on error), its tensors in the types
// the target chooses for this shape (gguf/quant_mix.h: a llama.cpp mix such as q4_k_m, or one
// type everywhere; general.file_type is the target's). InvalidArgument for an invalid shape, a
// target whose base type is outside IsWeightTargetType, a bad norm_jitter, or a vocab_from
// file that cannot be read or has no tokenizer.ggml.tokens.
Result<MakeRandomSummary> MakeRandomModel(const ModelShape& shape, const QuantTarget& target,
                                          const std::string& out, const MakeRandomOptions& options,
                                          ThreadPool* pool);

}  // namespace tarmac::gguf
