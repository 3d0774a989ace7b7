// ExpertRouter: which experts each token of a mixture-of-experts layer runs, and with what
// weight, from the router's logits: llama.cpp's build_moe_ffn semantics (the files are
// converted for it), as a pure function:
//
//   probs     = softmax(logits) | sigmoid(logits) | logits (kSoftmaxWeight)
//   selection = probs + selection_bias (DeepSeek-V3's bias: selection only, not the weights)
//   groups    (n_groups > 1) keep the n_groups_used groups whose top-2 selection sum is largest
//   chosen    = top n_used of selection; ties go to the lower expert index
//   weights   = probs of the chosen (softmax over them for kSoftmaxWeight), then divided by
//               their sum (clamped below at 2^-14, as llama.cpp) when normalize, then · scale
//
// Plain data and a function of its arguments; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace tarmac::model {

// The values of `<arch>.expert_gating_func` (llama.cpp's llama_expert_gating_func_type).
enum class ExpertGating : int32_t { kSoftmax = 1, kSigmoid = 2, kSoftmaxWeight = 3 };
std::string_view ExpertGatingName(ExpertGating g);  // "softmax", "sigmoid", "softmax_weight"

// The most experts a router routes over (llama.cpp's LLAMA_MAX_EXPERTS).
inline constexpr int32_t kMaxExperts = 512;

struct RouterConfig {
  int32_t n_expert = 0;  // 1..kMaxExperts
  int32_t n_used = 0;  // experts per token, 1 <= n_used <= n_expert
  ExpertGating gating = ExpertGating::kSoftmax;
  bool normalize = true;
  float scale = 1.0f;
  int32_t n_groups = 1;       // expert groups (n_expert a multiple of it)
  int32_t n_groups_used = 1;  // groups kept per token when n_groups > 1
};

// logits: [n_tokens][n_expert]; selection_bias: [n_expert] or null; ids, weights:
// [n_tokens][n_used], written. Preconditions: config valid as above; logits finite.
// Allocates nothing (it runs in every MoE layer of every step).
void RouteExperts(const RouterConfig& config, const float* logits, const float* selection_bias,
                  int32_t n_tokens, int32_t* ids, float* weights);

}  // namespace tarmac::model
