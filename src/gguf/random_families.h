// RandomFamily: what llama.cpp's converter writes for each model family make-random can
// write (tensor names and shapes per block, metadata keys), as data: make_random.cc builds
// the file from it. The reading side is model/arch.h (a module above this one); tests load
// every family's random file with both tarmac and llama.cpp to keep the two in step.
//
// Immutable, static storage; safe to read from any thread.
#pragma once

#include <string>
#include <string_view>

namespace tarmac::gguf {

struct RandomFamily {
  std::string_view name;        // general.architecture
  bool qkv_bias = false;        // attn_{q,k,v}.bias (qwen2)
  bool qk_norm = false;         // attn_q_norm, attn_k_norm [head_dim] (qwen3, gemma3)
  bool post_norms = false;      // post_attention_norm, post_ffw_norm (gemma2, gemma3)
  bool fused_qkv = false;       // attn_qkv [dim, q + 2 kv] instead of attn_q/k/v (phi3)
  bool fused_gate_up = false;   // ffn_up [dim, 2 ffn] = [gate; up], no ffn_gate (phi3)
  bool tied_only = false;       // never an output.weight (gemma2)
  bool key_length = false;      // writes attention.key_length / value_length (gemma, qwen3)
  bool rope_keys = true;        // writes rope.dimension_count and rope.freq_base (not gemma2's
                                // converter, unless the shape's base is not the default)
  bool softcaps = false;        // writes attn_ and final_logit_softcapping (gemma2)
  bool final_softcap = false;   // writes final_logit_softcapping when set (gemma3)
  bool window_key = false;      // writes attention.sliding_window when set (llama: Mistral-style)
  bool window_always = false;   // writes it always (gemma2: 4096 by default; phi3: 0 when none)
  bool window_pattern = false;  // accepts swa_pattern / rope_base_swa (gemma2/3)
  bool long_rope = false;       // orig_ctx: rope_factors_long/short, original_context_length,
                                // attn_factor (phi3)
  bool vocab_size_key = false;  // writes <arch>.vocab_size (llama)
  bool full_rotary = false;     // rope dims must equal head_dim (qwen3)
  bool q_is_dim = false;        // heads · head_dim must equal dim, no head_dim= (phi3)
  bool experts = false;         // may stack experts (expert_count, ffn_gate_inp, ffn_*_exps)
  bool experts_required = false;  // always has experts (qwen3moe)
  bool expert_ff_key = false;   // writes expert_feed_forward_length (qwen3moe, gpt-oss)
  bool o_bias = false;          // attn_output.bias (gpt-oss)
  bool attn_sinks = false;      // attn_sinks.weight [heads] (gpt-oss)
  bool expert_biases = false;   // ffn_gate_inp.bias and ffn_{gate,up,down}_exps.bias (gpt-oss)
  bool yarn = false;            // accepts yarn= (rope.scaling.type yarn, factor, orig_ctx=)
  std::string_view ffn_norm = "ffn_norm";  // the feed-forward block's input norm tensor
};

// nullptr for a family make-random does not write.
const RandomFamily* FindRandomFamily(std::string_view name);
// "llama, qwen2, qwen3, qwen3moe, gpt-oss, gemma2, gemma3, phi3".
std::string RandomFamilyNames();

}  // namespace tarmac::gguf
