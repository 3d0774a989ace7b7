// ModelShape: the hyper-parameters of a llama-architecture model, named presets of real model
// shapes, and the `--shape` parser (a preset name or "dim=..,layers=..,..."). Used to make
// random-weight models of realistic size for benchmarks and compatibility tests.
//
// Plain values; the preset table is immutable and safe to read from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tarmac::gguf {

struct ModelShape {
  std::string name;  // preset name, or "custom"
  int64_t dim = 0;       // embedding_length
  int64_t layers = 0;    // block_count
  int64_t heads = 0;     // attention.head_count
  int64_t kv_heads = 0;  // attention.head_count_kv
  int64_t ffn = 0;       // feed_forward_length
  int64_t vocab = 0;
  int64_t context = 2048;
  double rope_base = 10000.0;
  double rms_eps = 1e-5;
  bool tied = false;  // output.weight shares token_embd.weight (and is absent from the file)

  int64_t head_dim() const { return heads > 0 ? dim / heads : 0; }
  int64_t kv_dim() const { return head_dim() * kv_heads; }
  // Elements of all weight tensors.
  int64_t ParameterCount() const;
  // InvalidArgument naming the offending field: sizes must be positive and sane, heads must
  // divide dim with an even head_dim (RoPE rotates pairs), kv_heads must divide heads, and the
  // vocabulary must hold the 256 byte tokens plus one special token.
  Status Validate() const;
  // "dim=576,layers=30,heads=9,kv_heads=3,ffn=1536,vocab=49152,ctx=2048,rope_base=10000,tied=1"
  std::string ToString() const;
};

// Real shapes (from the models' published configs), smallest first.
const std::vector<ModelShape>& ModelPresets();

// A preset by name, or a custom spec "dim=..,layers=..,heads=..,kv_heads=..,ffn=..,vocab=.."
// with optional ctx=, rope_base=, eps=, tied=0|1 (kv_heads defaults to heads). The result is
// validated. InvalidArgument naming the unknown preset / key / bad number otherwise.
Result<ModelShape> ParseShape(std::string_view spec);

}  // namespace tarmac::gguf
