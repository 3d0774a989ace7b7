#include "model/expert_router.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/check.h"

namespace tarmac::model {
namespace {

// llama.cpp clamps the sum of the chosen weights to the smallest normal f16 before dividing.
constexpr float kMinWeightSum = 6.103515625e-5f;

// In place; the sum in double as ggml's soft_max accumulates.
void Softmax(float* x, int32_t n) {
  const float mx = *std::max_element(x, x + n);
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int32_t i = 0; i < n; ++i) x[i] *= inv;
}

// Of the n indices idx[0..n), the k whose v is largest into idx's first k entries, largest
// first; ties: lower index first.
void TopK(const float* v, int32_t* idx, int32_t n, int32_t k) {
  std::partial_sort(idx, idx + k, idx + n, [v](int32_t a, int32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  });
}

// Masks (to -inf) every group but the n_groups_used whose two largest scores sum highest.
void KeepBestGroups(const RouterConfig& c, float* selection) {
  const int32_t per_group = c.n_expert / c.n_groups;
  std::array<float, kMaxExperts> group_score;
  for (int32_t g = 0; g < c.n_groups; ++g) {
    const float* s = selection + g * per_group;
    float first = -std::numeric_limits<float>::infinity(), second = first;
    for (int32_t i = 0; i < per_group; ++i) {
      if (s[i] > first) {
        second = first;
        first = s[i];
      } else if (s[i] > second) {
        second = s[i];
      }
    }
    group_score[g] = per_group >= 2 ? first + second : first;
  }
  std::array<int32_t, kMaxExperts> groups;
  std::iota(groups.begin(), groups.begin() + c.n_groups, 0);
  TopK(group_score.data(), groups.data(), c.n_groups, c.n_groups_used);
  std::array<bool, kMaxExperts> keep{};
  for (int32_t i = 0; i < c.n_groups_used; ++i) keep[groups[i]] = true;
  for (int32_t g = 0; g < c.n_groups; ++g) {
    if (keep[g]) continue;
    std::fill(selection + g * per_group, selection + (g + 1) * per_group,
              -std::numeric_limits<float>::infinity());
  }
}

}  // namespace

std::string_view ExpertGatingName(ExpertGating g) {
  switch (g) {
    case ExpertGating::kSoftmax: return "softmax";
    case ExpertGating::kSigmoid: return "sigmoid";
    case ExpertGating::kSoftmaxWeight: return "softmax_weight";
  }
  return "?";
}

void RouteExperts(const RouterConfig& c, const float* logits, const float* selection_bias,
                  int32_t n_tokens, int32_t* ids, float* weights) {
  TARMAC_CHECK(c.n_used >= 1 && c.n_used <= c.n_expert && c.n_expert <= kMaxExperts);
  TARMAC_CHECK(c.n_groups >= 1 && c.n_expert % c.n_groups == 0);
  TARMAC_CHECK(c.n_groups == 1 || (c.n_groups_used >= 1 && c.n_groups_used <= c.n_groups));
  const int32_t E = c.n_expert, K = c.n_used;
  std::array<float, kMaxExperts> probs, selection;
  std::array<int32_t, kMaxExperts> idx;
  for (int32_t t = 0; t < n_tokens; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * E;
    std::copy(l, l + E, probs.begin());
    if (c.gating == ExpertGating::kSoftmax) {
      Softmax(probs.data(), E);
    } else if (c.gating == ExpertGating::kSigmoid) {
      for (int32_t e = 0; e < E; ++e) probs[e] = 1.0f / (1.0f + std::exp(-probs[e]));
    }
    std::copy(probs.begin(), probs.begin() + E, selection.begin());
    if (selection_bias != nullptr) {
      for (int32_t e = 0; e < E; ++e) selection[e] += selection_bias[e];
    }
    if (c.n_groups > 1) KeepBestGroups(c, selection.data());
    std::iota(idx.begin(), idx.begin() + E, 0);
    TopK(selection.data(), idx.data(), E, K);
    int32_t* id = ids + static_cast<int64_t>(t) * K;
    float* w = weights + static_cast<int64_t>(t) * K;
    for (int32_t j = 0; j < K; ++j) {
      id[j] = idx[j];
      w[j] = probs[idx[j]];
    }
    if (c.gating == ExpertGating::kSoftmaxWeight) Softmax(w, K);
    if (c.normalize) {
      float sum = 0;
      for (int32_t j = 0; j < K; ++j) sum += w[j];
      sum = std::max(sum, kMinWeightSum);
      for (int32_t j = 0; j < K; ++j) w[j] /= sum;
    }
    if (c.scale != 1.0f) {
      for (int32_t j = 0; j < K; ++j) w[j] *= c.scale;
    }
  }
}

}  // namespace tarmac::model
