#include "model/arch.h"

#include <array>

namespace tarmac::model {
namespace {

using kernels::RopeType;

constexpr ArchDescription Llama() {
  ArchDescription a;
  a.name = "llama";
  a.qkv_bias = Presence::kOptional;
  a.fused_qkv = Presence::kOptional;
  // Mistral's converted files: one window for every layer. llama.cpp reads no window for
  // `llama` (it attends to everything); a file that names one gets it here.
  a.window_rule = WindowRule::kAllLayers;
  a.experts = Presence::kOptional;  // Mixtral
  return a;
}

constexpr ArchDescription Qwen2() {
  ArchDescription a;
  a.name = "qwen2";
  a.rope = RopeType::kNeox;
  a.qkv_bias = Presence::kRequired;
  a.fused_qkv = Presence::kOptional;
  return a;
}

constexpr ArchDescription Qwen3() {
  ArchDescription a;
  a.name = "qwen3";
  a.rope = RopeType::kNeox;
  a.qkv_bias = Presence::kOptional;
  a.fused_qkv = Presence::kOptional;
  a.qk_norm = true;
  a.full_rotary = true;
  return a;
}

// Qwen3's attention with a sparse MoE feed-forward in every layer (Qwen3-30B-A3B, 235B-A22B).
constexpr ArchDescription Qwen3Moe() {
  ArchDescription a = Qwen3();
  a.name = "qwen3moe";
  a.experts = Presence::kRequired;
  a.expert_ff_key = true;
  return a;
}

// gpt-oss: biased attention with sinks, windowed and global layers alternating, YaRN rope
// (from the file's rope.scaling keys), and a biased MoE of clamped SwiGLU experts routed by
// a softmax over the chosen experts' logits.
constexpr ArchDescription GptOss() {
  ArchDescription a;
  a.name = "gpt-oss";
  a.rope = RopeType::kNeox;
  a.qkv_bias = Presence::kRequired;
  a.o_bias = true;
  a.attn_sinks = true;
  a.full_rotary = true;
  a.window_rule = WindowRule::kPattern;
  a.pattern_default = 2;  // even layers windowed (llama.cpp's set_swa_pattern(2))
  a.activation = FfnActivation::kSwiGluOai;
  a.ffn_norm_name = "post_attention_norm";
  a.experts = Presence::kRequired;
  a.expert_ff_key = true;
  a.gating = ExpertGating::kSoftmaxWeight;
  a.expert_norm = false;
  a.expert_biases = true;
  return a;
}

constexpr ArchDescription Gemma2() {
  ArchDescription a;
  a.name = "gemma2";
  a.rope = RopeType::kNeox;
  a.fused_qkv = Presence::kOptional;
  a.post_attn_norm = true;
  a.embd_head_scale_blocks = 46;
  a.attn_softcap = true;
  a.attn_softcap_default = 50.0f;
  a.final_softcap = true;
  a.final_softcap_default = 30.0f;
  a.window_rule = WindowRule::kPattern;
  a.window_default = 4096;
  a.pattern_default = 2;
  a.activation = FfnActivation::kGeGlu;
  a.post_ffn_norm = true;
  a.scale_embedding = true;
  a.output = Presence::kNever;
  return a;
}

constexpr ArchDescription Gemma3() {
  ArchDescription a;
  a.name = "gemma3";
  a.rope = RopeType::kNeox;
  a.fused_qkv = Presence::kOptional;
  a.qk_norm = true;
  a.post_attn_norm = true;
  a.embd_head_scale_blocks = 62;
  a.final_softcap = true;  // no capping unless the key says
  a.window_rule = WindowRule::kPattern;
  a.pattern_default = 6;   // windows only where the file names one
  a.swa_rope_base_default = 10000.0f;
  a.swa_rope_unscaled = true;
  a.activation = FfnActivation::kGeGlu;
  a.post_ffn_norm = true;
  a.scale_embedding = true;
  return a;
}

constexpr ArchDescription Phi3() {
  ArchDescription a;
  a.name = "phi3";
  a.rope = RopeType::kNeox;
  a.fused_qkv = Presence::kOptional;
  a.fused_gate_up = true;
  a.long_rope = true;
  // Phi-3 files carry `sliding_window`, but llama.cpp disables it for phi3 (its converter's
  // values are unreliable): every layer attends to everything, here too.
  a.window_rule = WindowRule::kNone;
  return a;
}

constexpr std::array<ArchDescription, 8> kArchs = {Llama(),  Qwen2(),  Qwen3(), Qwen3Moe(),
                                                   GptOss(), Gemma2(), Gemma3(), Phi3()};

}  // namespace

const ArchDescription* FindArch(std::string_view name) {
  for (const ArchDescription& a : kArchs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string SupportedArchNames() {
  std::string s;
  for (const ArchDescription& a : kArchs) {
    if (!s.empty()) s += ", ";
    s += a.name;
  }
  return s;
}

}  // namespace tarmac::model
