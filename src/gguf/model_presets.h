// ModelShape: the hyper-parameters of a decoder model of one of the families make-random
// writes (llama, qwen2, qwen3, gemma2, gemma3, phi3), named presets of real model shapes, and
// the `--shape` parser (a preset name with optional key=value overrides, or
// "dim=..,layers=..,..."). Used to make random-weight models of realistic size for benchmarks
// and compatibility tests.
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
  std::string arch = "llama";  // general.architecture of the file (gguf/random_families.h)
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
  // Family extras (0 or negative: the family's default, nothing written where it has none).
  int64_t head_dim_override = 0;  // attention.key_length (head_dim=; Gemma, Qwen3: != dim/heads)
  int64_t rot = 0;                // rope.dimension_count (rot=; 0: head_dim)
  int64_t window = 0;             // attention.sliding_window (window=)
  int64_t swa_pattern = -1;       // attention.sliding_window_pattern (swa_pattern=; gemma; 0:
                                  // every layer windowed; -1: not written)
  double rope_base_swa = 0;       // rope.freq_base_swa (rope_base_swa=; gemma3)
  double attn_softcap = -1;       // attn_logit_softcapping (attn_softcap=; gemma2 default 50)
  double final_softcap = -1;      // final_logit_softcapping (final_softcap=; gemma2 default 30)
  int64_t orig_ctx = 0;           // LongRoPE (orig_ctx=; phi3): original context and factors;
                                  // with yarn, YaRN's original context
  double yarn = 0;                // yarn=F (gpt-oss): rope.scaling.type yarn with factor F
  // Mixture of experts (experts=, experts_used=, expert_ffn=; llama, qwen3moe): experts > 0
  // stacks that many feed-forward experts per layer behind a router, experts_used of them per
  // token, each expert_ffn wide (0: ffn; qwen3moe writes it as expert_feed_forward_length).
  int64_t experts = 0;
  int64_t experts_used = 0;
  int64_t expert_ffn = 0;
  // router_ties=N: experts share their router rows in runs of N, so every token's router
  // scores tie in runs of N (tests of how ties are broken); 0 or 1: every row its own.
  int64_t router_ties = 0;

  int64_t expert_width() const { return expert_ffn > 0 ? expert_ffn : ffn; }
  int64_t head_dim() const {
    return head_dim_override > 0 ? head_dim_override : heads > 0 ? dim / heads : 0;
  }
  int64_t q_dim() const { return head_dim() * heads; }
  int64_t kv_dim() const { return head_dim() * kv_heads; }
  int64_t rope_dims() const { return rot > 0 ? rot : head_dim(); }
  // Elements of all weight tensors.
  int64_t ParameterCount() const;
  // Elements one token's forward reads: the experts_used of the experts (all, when dense).
  int64_t ActiveParameterCount() const;
  // InvalidArgument naming the offending field: a known family, sizes positive and sane,
  // heads dividing dim (unless head_dim is given) with an even head_dim (RoPE rotates pairs),
  // kv_heads dividing heads, a vocabulary holding the 256 byte tokens plus one special token,
  // and what the family requires (gemma2 tied, phi3 q_dim = dim and no head_dim, qwen3 full
  // rotary).
  Status Validate() const;
  // "dim=576,layers=30,heads=9,kv_heads=3,ffn=1536,vocab=49152,ctx=2048,rope_base=10000,tied=1"
  // plus the family extras that are set.
  std::string ToString() const;
};

// Real shapes (from the models' published configs), smallest first.
const std::vector<ModelShape>& ModelPresets();

// A preset by name, optionally followed by key=value overrides of its fields
// ("llama-3.2-1b,layers=8": named "llama-3.2-1b+layers=8"), or a custom spec
// "dim=..,layers=..,heads=..,kv_heads=..,ffn=..,vocab=.." with optional ctx=, rope_base=,
// eps=, tied=0|1 (kv_heads defaults to heads) and the family extras head_dim=, rot=, window=,
// swa_pattern=, rope_base_swa=, attn_softcap=, final_softcap=, orig_ctx= (the same keys
// override a preset). arch (when not empty) sets the family, also of a preset. The result is
// validated; experts=, experts_used=, expert_ffn= give a mixture of experts. InvalidArgument naming the unknown preset / key / bad number otherwise.
Result<ModelShape> ParseShape(std::string_view spec, std::string_view arch = {});

}  // namespace tarmac::gguf
