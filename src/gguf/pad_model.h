// Padding a llama-architecture GGUF model with blocks that compute but contribute nothing.
//
// PadModel writes a copy of a llama model with `extra_layers` transformer blocks appended after
// the existing ones, every FFN widened to `ffn` hidden units, and the model's function left
// exactly unchanged: the residual stream, and so the logits, are the same bit for bit, while
// every token pays for the extra blocks (weights read, K/V written, attention computed). It
// makes a benchmark target that costs what a large model costs but computes a small trained
// model's function.
//
// How the function is kept:
//  - appended block n+j copies every tensor of original block j % n (norms, attn_q/k/v and
//    their biases if present: realistic magnitudes, finite activations, no denormals), except
//    attn_output.weight and ffn_down.weight, which are all zeros: the block adds W·h = 0 to the
//    residual. Its ffn_gate/ffn_up are the source's rows tiled up to `ffn` rows.
//  - llama.feed_forward_length is one value for all layers, so the original blocks are widened
//    too: ffn_gate/ffn_up get zero rows and ffn_down zero columns. The extra hidden units are
//    silu(0)·0 = 0 and are multiplied by zero columns, so they add exact zeros to each dot
//    product (tests/model/padded_model_test.cc checks bit-identical logits).
//  - all-zero bytes encode 0.0 in every type tarmac computes with (f32, f16, bf16, q8_0, q4_0,
//    q4_K, q6_K: the block scales are zero), so padding is done on raw bytes, in the input
//    tensor's own type; no tensor is converted.
//  - metadata is copied; llama.block_count and llama.feed_forward_length are updated and
//    general.name (if present) gets a "(padded ...)" suffix. The tokenizer is untouched.
//
// Output is streamed tensor by tensor through gguf::Writer (the input is memory-mapped; one
// output tensor is in memory at a time) and written atomically: on any error no file is left at
// `out`. All input checks run before anything is written.
//
// Thread-safety: reentrant; no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "tensor/dtype.h"

namespace tarmac::gguf {

// Upper bound on the padded model's block count (a sanity limit, far above real models).
inline constexpr int64_t kMaxPaddedLayers = 4096;

struct PadOptions {
  int64_t extra_layers = 0;  // blocks to append; >= 0
  int64_t ffn = 0;           // FFN width of every block in the output; 0 keeps the input's
  // Called after each output tensor is written, with its name, type, index and count. Optional.
  std::function<void(const std::string& name, DType type, size_t index, size_t count)> on_tensor;
};

struct PadSummary {
  int64_t layers_in = 0;
  int64_t layers_out = 0;
  int64_t ffn_in = 0;
  int64_t ffn_out = 0;
  int64_t parameters_in = 0;
  int64_t parameters_out = 0;
  uint64_t tensor_bytes_out = 0;
  size_t tensors_out = 0;
};

// Errors (nothing is written unless every check passes):
//  - InvalidArgument: out is the input file; extra_layers < 0 or the result above
//    kMaxPaddedLayers blocks; ffn (when nonzero) below the input's llama.feed_forward_length or
//    not a multiple of ffn_down's block size; general.architecture not "llama"; a block tensor
//    missing, of the wrong shape, or not one pad knows how to extend (names it);
//  - Unimplemented: a block tensor whose dtype tarmac cannot compute with (zero bytes would
//    not be known to mean 0.0);
//  - IoError / DataLoss from reading `in` (prefixed with its path), IoError from writing `out`.
Result<PadSummary> PadModel(const std::string& in, const std::string& out,
                            const PadOptions& options);

}  // namespace tarmac::gguf
