#include "gguf/random_families.h"

#include <array>

namespace tarmac::gguf {
namespace {

constexpr RandomFamily Llama() {
  RandomFamily f;
  f.name = "llama";
  f.window_key = true;
  f.vocab_size_key = true;
  f.experts = true;  // Mixtral
  return f;
}

constexpr RandomFamily Qwen2() {
  RandomFamily f;
  f.name = "qwen2";
  f.qkv_bias = true;
  return f;
}

constexpr RandomFamily Qwen3() {
  RandomFamily f;
  f.name = "qwen3";
  f.qk_norm = true;
  f.key_length = true;
  f.full_rotary = true;
  return f;
}

constexpr RandomFamily Qwen3Moe() {
  RandomFamily f = Qwen3();
  f.name = "qwen3moe";
  f.experts = true;
  f.experts_required = true;
  f.expert_ff_key = true;
  return f;
}

constexpr RandomFamily GptOss() {
  RandomFamily f;
  f.name = "gpt-oss";
  f.qkv_bias = true;
  f.key_length = true;
  f.full_rotary = true;
  f.window_key = true;
  f.experts = true;
  f.experts_required = true;
  f.expert_ff_key = true;
  f.o_bias = true;
  f.attn_sinks = true;
  f.expert_biases = true;
  f.yarn = true;
  f.ffn_norm = "post_attention_norm";
  return f;
}

constexpr RandomFamily Gemma2() {
  RandomFamily f;
  f.name = "gemma2";
  f.post_norms = true;
  f.tied_only = true;
  f.key_length = true;
  f.rope_keys = false;
  f.softcaps = true;
  f.window_key = true;
  f.window_always = true;
  f.window_pattern = true;
  return f;
}

constexpr RandomFamily Gemma3() {
  RandomFamily f;
  f.name = "gemma3";
  f.qk_norm = true;
  f.post_norms = true;
  f.key_length = true;
  f.final_softcap = true;
  f.window_key = true;
  f.window_pattern = true;
  return f;
}

constexpr RandomFamily Phi3() {
  RandomFamily f;
  f.name = "phi3";
  f.fused_qkv = true;
  f.fused_gate_up = true;
  f.window_key = true;
  f.window_always = true;
  f.long_rope = true;
  f.q_is_dim = true;
  return f;
}

constexpr std::array<RandomFamily, 8> kFamilies = {Llama(),  Qwen2(),  Qwen3(), Qwen3Moe(),
                                                   GptOss(), Gemma2(), Gemma3(), Phi3()};

}  // namespace

const RandomFamily* FindRandomFamily(std::string_view name) {
  for (const RandomFamily& f : kFamilies) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string RandomFamilyNames() {
  std::string s;
  for (const RandomFamily& f : kFamilies) {
    if (!s.empty()) s += ", ";
    s += f.name;
  }
  return s;
}

}  // namespace tarmac::gguf
