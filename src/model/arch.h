// ArchDescription: what one model family (a GGUF `general.architecture`) is made of, as data:
// which tensors a block has, which norms run where, the feed-forward activation, how the
// attention of each layer is chosen (sliding windows, soft-capping, rope bases) and the
// scalings. The loader (model_config.cc, model_weights.cc) and the forward pass
// (llama_model.cc) read only these fields, never the family's name: a new family is a new
// entry in the table (arch.cc) plus whatever kernel it truly needs.
//
// The facts follow llama.cpp's reading of the same GGUF files (its converter, its per-arch
// hyper-parameter loading and graph), since those files are what users bring: e.g. Gemma's
// norm weights are stored with the +1 already added, so every norm here is a plain RMSNorm.
//
// Immutable, static storage; safe to read from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops.h"
#include "model/expert_router.h"

namespace tarmac::model {

// Whether a family's files have a tensor (or key).
enum class Presence { kNever, kOptional, kRequired };

enum class FfnActivation {
  kSwiGlu,     // silu(gate) · up
  kGeGlu,      // gelu_tanh(gate) · up
  kSwiGluOai,  // gpt-oss: min(gate, 7) · sigmoid(1.702 · min(gate, 7)) · (clamp(up, ±7) + 1)
};

// How the layers' sliding windows are chosen.
enum class WindowRule {
  kNone,       // no sliding window, even if the file names one (llama.cpp ignores it too)
  kAllLayers,  // `<arch>.attention.sliding_window` (optional): every layer (Mistral-style)
  kPattern,    // windowed and global layers alternate: of every `sliding_window_pattern`
               // layers the last is global (llama.cpp's set_swa_pattern)
};

struct ArchDescription {
  std::string_view name;  // general.architecture

  // ---- attention block: attn_norm -> Q/K/V -> [q/k norm] -> rope -> attention -> attn_output
  kernels::RopeType rope = kernels::RopeType::kNorm;
  Presence qkv_bias = Presence::kNever;    // attn_{q,k,v}.bias
  Presence fused_qkv = Presence::kNever;   // attn_qkv.weight: Q, K, V rows stacked (in place of
                                           // attn_q/k/v when present)
  bool qk_norm = false;         // attn_q_norm, attn_k_norm [head_dim]: per-head RMSNorm of Q
                                // and K before rope
  bool post_attn_norm = false;  // post_attention_norm: RMSNorm of the attention output before
                                // the residual add
  bool o_bias = false;          // attn_output.bias [n_embd] (required when set)
  bool attn_sinks = false;      // attn_sinks.weight [n_head]: a logit per head in every softmax's
                                // denominator (gpt-oss)
  // Queries are scaled by 1/sqrt(head_dim), except for a shape with this many blocks (0: none),
  // scaled by 1/sqrt(n_embd / n_head): Gemma's 27B models (query_pre_attn_scalar =
  // n_embd / n_head; GGUF has no key for it, llama.cpp tells the shapes apart this way).
  int32_t embd_head_scale_blocks = 0;
  // `<arch>.attn_logit_softcapping`: read (default below when absent) or not (no capping).
  bool attn_softcap = false;
  float attn_softcap_default = 0.0f;
  // `<arch>.final_logit_softcapping`: read (default below when absent) or not (no capping).
  bool final_softcap = false;
  float final_softcap_default = 0.0f;

  // ---- sliding windows
  WindowRule window_rule = WindowRule::kNone;
  int32_t window_default = 0;   // kPattern: window when the key is absent (0: then no windows)
  int32_t pattern_default = 0;  // kPattern: `sliding_window_pattern` when absent
  // Rope of the windowed layers (kPattern): `<arch>.rope.freq_base_swa` when present, else
  // this base (0: the global `rope.freq_base`); their frequency scale is 1 with
  // swa_rope_unscaled (Gemma 3: linear rope scaling applies to the global layers only), else
  // the global one. kAllLayers windows rotate as the global rope.
  float swa_rope_base_default = 0.0f;
  bool swa_rope_unscaled = false;

  // ---- feed-forward block: ffn_norm -> gate/up -> activation -> ffn_down -> [post norm]
  FfnActivation activation = FfnActivation::kSwiGlu;
  // The tensor (blk.N.<name>.weight) of the RMSNorm before the feed-forward block (gpt-oss's
  // converter calls it post_attention_norm).
  std::string_view ffn_norm_name = "ffn_norm";
  bool fused_gate_up = false;   // ffn_up holds [gate; up] (2·n_ff rows) and there is no ffn_gate
  bool post_ffn_norm = false;   // post_ffw_norm: RMSNorm of the FFN output before the residual add

  // ---- mixture of experts: a router (ffn_gate_inp [n_embd, n_expert]) and the experts stacked
  // in 3-D tensors (ffn_{gate,up}_exps [n_embd, ff, n_expert], ffn_down_exps [ff, n_embd,
  // n_expert]) in place of ffn_gate/up/down, with `<arch>.expert_count` and
  // `expert_used_count`. kOptional: experts when expert_count > 0 (llama: Mixtral's files).
  Presence experts = Presence::kNever;
  bool expert_ff_key = false;  // experts' width: `<arch>.expert_feed_forward_length` (absent:
                               // feed_forward_length / expert_used_count, as llama.cpp), else
                               // feed_forward_length
  // How llama.cpp routes the family's tokens (it hard-codes these per family; a file's
  // expert_gating_func / expert_weights_norm that says otherwise is refused).
  ExpertGating gating = ExpertGating::kSoftmax;
  bool expert_norm = true;     // the chosen weights divided by their sum
  bool expert_biases = false;  // ffn_gate_inp.bias [n_expert] on the router's logits, and
                               // ffn_{gate,up}_exps.bias [ff, n_expert], ffn_down_exps.bias
                               // [n_embd, n_expert] (gpt-oss)

  // ---- embeddings, rope scaling
  bool scale_embedding = false;             // x = token embedding · sqrt(n_embd)
  Presence output = Presence::kOptional;    // output.weight; absent (or kNever): tied to
                                            // token_embd
  // LongRoPE (Phi-3): global rope_factors_long/short [n_rot/2] divide the rope frequencies,
  // long ones when the served context exceeds `rope.scaling.original_context_length`;
  // `rope.scaling.attn_factor` scales the rotated dims.
  bool long_rope = false;
  // `<arch>.rope.dimension_count` must equal the head size (llama.cpp asserts it for qwen3).
  bool full_rotary = false;
};

// The description of `general.architecture` name, or nullptr.
const ArchDescription* FindArch(std::string_view name);
// Every supported family's name, for error messages ("llama, qwen2, ...").
std::string SupportedArchNames();

}  // namespace tarmac::model
