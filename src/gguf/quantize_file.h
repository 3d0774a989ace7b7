// Quantizing a GGUF model file, and the row-parallel conversion it shares with make_random.
//
// QuantizeFile reads a GGUF file (any compute dtype per tensor), copies all of its metadata,
// and writes a new file whose weights are converted as the target says (gguf/quant_mix.h): a
// llama.cpp file type such as q4_k_m picks each tensor's type by llama.cpp's rules, a plain
// tensor type (or --pure) puts that type everywhere; 1-D tensors (norms) become F32 whatever
// their input type. Where a tensor's row length does not fit the chosen type's block size the
// tensor falls back as llama.cpp's quantizer does (PlanTensorType), and the fallback is
// reported. Output is streamed tensor by tensor through gguf::Writer (never two copies of the
// model in memory) and written atomically: on any error no file is left at `out`.
//
// Metadata changes: general.file_type becomes the target's llama_ftype (LlamaFileType below
// for a plain type); quantized targets set general.quantization_version = 2.
//
// Thread-safety: functions are reentrant; a ThreadPool passed in is used by the calling thread
// only for the duration of the call (it must not be used concurrently by someone else).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/quant_mix.h"
#include "tensor/dtype.h"

namespace tarmac::gguf {

// llama.cpp's llama_ftype value describing a file whose weights are all `type` (F32 0, F16 1,
// Q4_0 2, ..., MXFP4 38); for the K types the "_S" mix (Q4_K 14 is MOSTLY_Q4_K_S: plain q4_K
// everywhere, where Q4_K_M (15) would promise q6_K for attn_v/ffn_down halves and output).
// nullopt for a type no file is "mostly" of (Q8_1, Q8_K, the integer types).
std::optional<uint32_t> LlamaFileType(DType type);

// Types QuantizeFile and MakeRandomModel can produce: every type llama.cpp computes.
bool IsWeightTargetType(DType type);

// Type a tensor is stored in when the file's target is `target`: 1-D -> F32; otherwise target
// when row_len is a multiple of its block size, else llama.cpp's fallback for the type (Q4_K ->
// Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K / Q3_K / TQ* / IQ* -> IQ4_NL) where its block of 32
// divides the row, else F16. *note (if non-null) explains a fallback, empty otherwise.
DType PlanTensorType(DType target, int num_dims, int64_t row_len, std::string* note);

// Converts `rows` rows of `row_len` elements to `type`, row r written at out + r * RowBytes.
// produce(r, buf) fills buf[0..row_len) with the f32 values of row r and may fail. Rows run in
// parallel chunks on `pool` (nullptr: on the calling thread); produce must be safe to call
// concurrently for different rows. Returns the first error (produce's, or QuantizeRowRef's
// prefixed with the row).
// Preconditions: row_len is a multiple of the type's block size; out holds rows * RowBytes.
using RowProducer = std::function<Status(int64_t row, float* buf)>;
Status ConvertRows(DType type, int64_t rows, int64_t row_len, const RowProducer& produce,
                   uint8_t* out, ThreadPool* pool);

struct TensorReport {
  std::string name;
  std::vector<int64_t> dims;
  DType from = DType::kF32;
  DType to = DType::kF32;
  std::string note;  // why `to` differs from the target's base type; empty otherwise
  bool fallback = false;  // the chosen type's block did not divide the rows (PlanTensorType)
  bool mixed = false;     // the target's mix rules chose another type than its base
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

struct QuantizeOptions {
  // Called during writing, once per tensor after it is converted, with its index and count
  // (for progress output). Optional.
  std::function<void(const TensorReport&, size_t index, size_t count)> on_tensor;
};

struct QuantizeSummary {
  std::vector<TensorReport> tensors;  // in file order
  uint64_t bytes_in = 0;              // tensor data bytes of the input
  uint64_t bytes_out = 0;             // tensor data bytes of the output
  int fallbacks = 0;                  // tensors whose chosen type fell back (block size)
  int mixed = 0;                      // tensors the mix's rules moved off its base type
};

// The mix's rules read the model's facts from `in`'s metadata (ReadModelFacts).
// InvalidArgument for a target whose base type is outside IsWeightTargetType or out == in;
// IoError / DataLoss from reading `in` (prefixed with its path); Unimplemented for an input
// tensor whose dtype cannot be dequantized; InvalidArgument naming tensor and element for
// non-finite weights.
Result<QuantizeSummary> QuantizeFile(const std::string& in, const std::string& out,
                                     const QuantTarget& target, const QuantizeOptions& options,
                                     ThreadPool* pool);

}  // namespace tarmac::gguf
