// ModelWeights: views of a decoder's tensors in a GGUF file, found and checked under the
// family's ArchDescription: every tensor the description calls for present with its shape
// and a dtype the kernels compute with (errors name the tensor and why it is needed); fused
// tensors (attn_qkv, Phi-3's gate+up ffn_up) are split into per-projection row views of the
// same bytes.
//
// Owns f32 copies of the 1-D tensors not usable in place (f16/bf16 or unaligned); the matrix
// views point into the file's bytes, which must outlive this. LlamaModel's kernels::PreparedWeights
// may later give a view a prepared copy (MatrixView::prepared) and release its bytes. Not thread-safe to mutate.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "tensor/view.h"

namespace tarmac::model {

struct LayerWeights {
  const float* attn_norm = nullptr;       // [n_embd]
  MatrixView wq, wk, wv, wo;              // [q_dim x n_embd], [kv_dim x n_embd] x2, [n_embd x q_dim]
  const float* bq = nullptr;              // [q_dim] or nullptr
  const float* bk = nullptr;              // [kv_dim]
  const float* bv = nullptr;              // [kv_dim]
  const float* q_norm = nullptr;          // [head_dim] (desc.qk_norm) or nullptr
  const float* k_norm = nullptr;          // [head_dim]
  const float* post_attn_norm = nullptr;  // [n_embd] (desc.post_attn_norm) or nullptr
  const float* bo = nullptr;              // [n_embd] (desc.o_bias) or nullptr
  const float* sinks = nullptr;           // [n_head] (desc.attn_sinks) or nullptr
  const float* ffn_norm = nullptr;        // [n_embd]
  MatrixView w_gate, w_up, w_down;        // [n_ff x n_embd] x2, [n_embd x n_ff] (dense layers)
  // Mixture of experts (config.is_moe()), in place of w_gate/w_up/w_down: the router and one
  // view per expert into the stacked 3-D tensors (expert e's rows are contiguous there).
  MatrixView router;                      // [n_expert x n_embd] ffn_gate_inp
  std::vector<MatrixView> gate_exps, up_exps;  // [n_expert] of [n_ff_exp x n_embd]
  std::vector<MatrixView> down_exps;      // [n_expert] of [n_embd x n_ff_exp]
  const float* router_bias = nullptr;     // [n_expert] (desc.expert_biases) or nullptr
  const float* gate_exps_bias = nullptr;  // [n_expert][n_ff_exp]
  const float* up_exps_bias = nullptr;    // [n_expert][n_ff_exp]
  const float* down_exps_bias = nullptr;  // [n_expert][n_embd]
  bool is_moe() const { return !gate_exps.empty(); }
  const float* post_ffn_norm = nullptr;   // [n_embd] (desc.post_ffn_norm) or nullptr
};

struct ModelWeights {
  MatrixView tok_embd;                  // [n_vocab x n_embd]
  MatrixView output;                    // [n_vocab x n_embd] (tok_embd when tied)
  const float* output_norm = nullptr;   // [n_embd]
  std::vector<LayerWeights> layers;
  const float* rope_freqs = nullptr;    // [n_rot/2] llama-3 frequency divisors, or nullptr
  const float* rope_long = nullptr;     // [n_rot/2] LongRoPE factors (desc.long_rope), or nullptr
  const float* rope_short = nullptr;
  int64_t bytes = 0;                    // bytes of every tensor used
  int64_t expert_bytes = 0;             // of which the experts' (every layer's, all experts)
  int64_t lookup_only_bytes = 0;        // and token_embd's when not tied to output (a step
                                        // reads one row of it per token)
  std::vector<std::vector<float>> owned_f32;  // storage of converted 1-D tensors

  // Every projection matrix, each layer's (experts included) then the output (the ones a kernel
  // may re-lay out).
  std::vector<MatrixView*> Projections();
  // Bytes one token's decode step reads: everything but an untied token_embd (one row of it)
  // and the experts, and of those the n_used / n_expert share a token chooses.
  int64_t ActiveBytesPerToken(const ModelConfig& c) const;
};

// Finds every tensor of `c`'s family in `file`. Preconditions: c from LoadModelConfig(file).
Status LoadWeights(const gguf::File& file, const ModelConfig& c, ModelWeights* out);

}  // namespace tarmac::model
