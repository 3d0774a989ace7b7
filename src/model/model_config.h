// ModelConfig: the hyper-parameters of a llama-family model, read from GGUF metadata
// (`<arch>.*` keys). Plain data; validated once by LoadModelConfig.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace tarmac::model {

enum class Arch { kLlama, kQwen2 };

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string arch_name;       // general.architecture
  std::string name;            // general.name (may be empty)
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;     // <arch>.context_length
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;        // n_embd / n_head unless <arch>.attention.key_length says
  int32_t n_ff = 0;
  int32_t n_rot = 0;           // rotary dims per head (<arch>.rope.dimension_count)
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1 / <arch>.rope.scaling.factor for linear scaling
  float rms_eps = 1e-5f;
  bool neox_rope = false;      // qwen2: rotate (i, i + n_rot/2); llama: adjacent pairs
  bool qkv_bias = false;       // qwen2 has biases on Q, K, V

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
};

// Errors name the missing or inconsistent key. n_vocab comes from the tokenizer tokens or
// the embedding shape.
Result<ModelConfig> LoadModelConfig(const gguf::File& file);

}  // namespace tarmac::model
