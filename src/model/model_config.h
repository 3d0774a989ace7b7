// ModelConfig: the hyper-parameters of a decoder model, read from GGUF metadata (`<arch>.*`
// keys) under its family's ArchDescription (model/arch.h), with the per-layer attention
// resolved (which layers are windowed, which rope they use). Plain data; validated once by
// LoadModelConfig.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/arch.h"

namespace tarmac::model {

struct ModelConfig {
  const ArchDescription* desc = nullptr;  // the family; set by LoadModelConfig (static storage)
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

  // Attention: scores are attn_scale · q·k (1/sqrt(head_dim) for most families), soft-capped
  // by attn_softcap (0: off); final logits soft-capped by final_softcap (0: off).
  float attn_scale = 1.0f;
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // Per layer: the sliding window (0: the layer attends to the whole context). Windowed
  // layers rotate with rope_freq_base_swa and rope_freq_scale_swa (the global values unless
  // the family gives its windowed layers their own rope).
  std::vector<int32_t> layer_window;
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;
  // LongRoPE (desc->long_rope): the context the short factors were trained for
  // (<arch>.rope.scaling.original_context_length, else n_ctx_train) and the factor scaling
  // the rotated dims (<arch>.rope.scaling.attn_factor, else 1).
  int32_t n_ctx_orig = 0;
  float rope_attn_factor = 1.0f;
  // YaRN (rope.scaling.type yarn; rope_freq_scale = 1 / factor): the context it extends
  // (rope.scaling.original_context_length, else n_ctx_train) and the ramp's corners
  // (rope.scaling.yarn_beta_fast / _slow, else llama.cpp's 32 and 1). rope_attn_factor
  // (rope.scaling.attn_factor, else 1) scales the rotated dims as for LongRoPE.
  bool yarn = false;
  int32_t yarn_orig_ctx = 0;
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;

  // Mixture of experts: router.n_expert > 0 (then every layer's feed-forward is n_expert
  // experts of width n_ff_exp, router.n_used of them per token); 0 for a dense model.
  RouterConfig router;
  int32_t n_ff_exp = 0;
  bool is_moe() const { return router.n_expert > 0; }

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
  bool any_window() const;
  // Whether windowed layers rotate differently from global ones (a second rope).
  bool separate_swa_rope() const {
    return any_window() &&
           (rope_freq_base_swa != rope_freq_base || rope_freq_scale_swa != rope_freq_scale);
  }
  // Positions a sequence's KV must keep: when every layer is windowed, the largest window
  // (KV blocks wholly before position - window + 1 are never read again); 0 when some layer
  // attends to everything.
  int32_t KvRetentionWindow() const;
};

// Errors name the missing or inconsistent key; an unsupported architecture names the
// supported ones. n_vocab comes from the embedding shape.
Result<ModelConfig> LoadModelConfig(const gguf::File& file);

}  // namespace tarmac::model
