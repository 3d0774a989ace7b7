// RouteExperts: llama.cpp's build_moe_ffn routing, case by case with hand-computed values:
// softmax vs sigmoid (+ selection bias that chooses but does not weigh), renormalisation on
// and off, the scale, softmax over the chosen (gpt-oss), grouped top-k (DeepSeek-V3), and
// ties going to the lower expert index.
#include "model/expert_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tarmac::model {
namespace {

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed Route(const RouterConfig& c, const std::vector<float>& logits,
             const std::vector<float>* bias = nullptr) {
  const int32_t n = static_cast<int32_t>(logits.size()) / c.n_expert;
  Routed r{std::vector<int32_t>(n * c.n_used), std::vector<float>(n * c.n_used)};
  RouteExperts(c, logits.data(), bias ? bias->data() : nullptr, n, r.ids.data(), r.weights.data());
  return r;
}

std::vector<double> Softmax(const std::vector<float>& l) {
  double z = 0;
  for (float v : l) z += std::exp(v);
  std::vector<double> p;
  for (float v : l) p.push_back(std::exp(v) / z);
  return p;
}

TEST(ExpertRouterTest, SoftmaxTopKRenormalised) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f};
  const RouterConfig c{.n_expert = 4, .n_used = 2, .gating = ExpertGating::kSoftmax};
  const Routed r = Route(c, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3}));
  const auto p = Softmax(logits);
  EXPECT_NEAR(r.weights[0], p[1] / (p[1] + p[3]), 1e-6);
  EXPECT_NEAR(r.weights[1], p[3] / (p[1] + p[3]), 1e-6);
}

TEST(ExpertRouterTest, WithoutRenormalisationTheProbabilitiesStayAndScaleApplies) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f};
  RouterConfig c{.n_expert = 4, .n_used = 2, .gating = ExpertGating::kSoftmax,
                 .normalize = false, .scale = 2.5f};
  const Routed r = Route(c, logits);
  const auto p = Softmax(logits);
  EXPECT_NEAR(r.weights[0], 2.5 * p[1], 1e-6);
  EXPECT_NEAR(r.weights[1], 2.5 * p[3], 1e-6);
}

TEST(ExpertRouterTest, SigmoidWithSelectionBiasChoosesByBiasWeighsWithout) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -0.5f};
  // The bias lifts expert 3 (sigmoid 0.38 + 1) above all the others for selection only: it
  // comes first, weighted by its unbiased probability.
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 1.0f};
  const RouterConfig c{.n_expert = 4, .n_used = 2, .gating = ExpertGating::kSigmoid,
                       .normalize = false};
  const Routed r = Route(c, logits, &bias);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 2}));
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  EXPECT_NEAR(r.weights[0], sig(-0.5), 1e-6);  // unbiased
  EXPECT_NEAR(r.weights[1], sig(2.0), 1e-6);
  const RouterConfig norm{.n_expert = 4, .n_used = 2, .gating = ExpertGating::kSigmoid};
  const Routed n = Route(norm, logits, &bias);
  EXPECT_NEAR(n.weights[0] + n.weights[1], 1.0, 1e-6);
  EXPECT_NEAR(n.weights[1], sig(2.0) / (sig(2.0) + sig(-0.5)), 1e-6);
}

TEST(ExpertRouterTest, SoftmaxOverTheChosen) {
  const std::vector<float> logits = {3.0f, -2.0f, 1.0f, 0.0f};
  const RouterConfig c{.n_expert = 4, .n_used = 2, .gating = ExpertGating::kSoftmaxWeight,
                       .normalize = false};
  const Routed r = Route(c, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 2}));
  EXPECT_NEAR(r.weights[0], std::exp(3.0) / (std::exp(3.0) + std::exp(1.0)), 1e-6);
}

TEST(ExpertRouterTest, GroupedTopKKeepsTheGroupsWithTheBestPairs) {
  // 8 experts in 4 groups of 2; keep 2 groups. Group scores (sum of both): g0 = 0.2+0.1,
  // g1 = 0.9+0.0, g2 = 0.5+0.45, g3 = 0.3+0.3. Best: g2 (0.95), g1 (0.9). Expert 6 (0.3)
  // and 7 would beat expert 3 (0.0) ungrouped, but their group is masked.
  const std::vector<float> scores = {0.2f, 0.1f, 0.9f, 0.0f, 0.5f, 0.45f, 0.3f, 0.3f};
  const RouterConfig c{.n_expert = 8, .n_used = 4, .gating = ExpertGating::kSoftmaxWeight,
                       .normalize = false, .n_groups = 4, .n_groups_used = 2};
  // kSoftmaxWeight leaves the scores as given for selection.
  const Routed r = Route(c, scores);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 4, 5, 3}));
  const RouterConfig flat{.n_expert = 8, .n_used = 4, .gating = ExpertGating::kSoftmaxWeight,
                          .normalize = false};
  EXPECT_EQ(Route(flat, scores).ids, (std::vector<int32_t>{2, 4, 5, 6}));
}

TEST(ExpertRouterTest, TiesGoToTheLowerIndex) {
  // Experts 1, 3, 5 tie for the top; 0, 2 tie below them.
  const std::vector<float> logits = {0.5f, 1.0f, 0.5f, 1.0f, 0.0f, 1.0f};
  const RouterConfig c{.n_expert = 6, .n_used = 4, .gating = ExpertGating::kSoftmax};
  const Routed r = Route(c, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 3, 5, 0}));
  // All equal: the first n_used, each weighted 1/n_used.
  const RouterConfig all{.n_expert = 8, .n_used = 3, .gating = ExpertGating::kSoftmax};
  const Routed a = Route(all, std::vector<float>(8, 0.25f));
  EXPECT_EQ(a.ids, (std::vector<int32_t>{0, 1, 2}));
  for (float w : a.weights) EXPECT_NEAR(w, 1.0 / 3, 1e-6);
}

TEST(ExpertRouterTest, TokensAreIndependentAndTheSumIsClamped) {
  // Two tokens; the second's sigmoid weights are tiny: their sum is clamped at 2^-14.
  const std::vector<float> logits = {0.0f, 1.0f, -30.0f, -31.0f};
  const RouterConfig c{.n_expert = 2, .n_used = 1, .gating = ExpertGating::kSigmoid};
  const Routed r = Route(c, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 0}));
  EXPECT_NEAR(r.weights[0], 1.0, 1e-6);
  const double tiny = 1 / (1 + std::exp(30.0));
  EXPECT_NEAR(r.weights[1], tiny / 6.103515625e-5, 1e-9);
}

}  // namespace
}  // namespace tarmac::model
