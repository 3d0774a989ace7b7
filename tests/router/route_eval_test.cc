// RouteLLM's metrics on synthetic outcomes with known answers.
#include "router/route_eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tarmac::router {
namespace {

// n prompts: half gain `gap` from the large model, half gain nothing; each attempt costs 1
// (small), 0.25 (its discarded part) and 10 (large).
std::vector<PromptOutcome> TwoKinds(int n, bool confidence_knows) {
  std::vector<PromptOutcome> p;
  std::mt19937 rng(1);
  for (int i = 0; i < n; ++i) {
    PromptOutcome o;
    const bool hard = i % 2 == 0;
    o.q_small = -3.0;
    o.q_large = hard ? -1.0 : -3.0;
    o.confidence = confidence_knows ? (hard ? 0.0 : 1.0) + 0.01 * (rng() % 10) : static_cast<double>(rng() % 1000);
    o.small_full = 1;
    o.small_attempt = 0.25;
    o.large = 10;
    p.push_back(o);
  }
  return p;
}

TEST(RouteEval, AConfidenceThatKnowsTheHardPromptsRecoversTheGapEarly) {
  const auto p = TwoKinds(200, true);
  const CascadeEval e = EvaluateCascade(p);
  EXPECT_DOUBLE_EQ(e.q_small, -3.0);
  EXPECT_DOUBLE_EQ(e.q_large, -2.0);
  // Escalating the 100 hard prompts first: PGR reaches 1 at share 0.5, stays there.
  EXPECT_NEAR(e.curve[100].pgr, 1.0, 1e-9);
  EXPECT_NEAR(e.apgr, 0.75, 0.01);  // area: 0.25 (ramp) + 0.5 (flat at 1)
  EXPECT_NEAR(e.cpt50, 0.25, 0.01);
  EXPECT_NEAR(e.cpt80, 0.40, 0.01);
  EXPECT_DOUBLE_EQ(e.cost_large, 2000);
  EXPECT_DOUBLE_EQ(e.cost_small, 200);
  // Within one standard error (1 / sqrt(200): sd of q_large is 1) of always-large: the hard
  // prompts but the last 0.0707 / 2 * 200 = 7 of them escalated.
  EXPECT_NEAR(e.se_large, 1.0 / std::sqrt(200.0), 1e-3);
  EXPECT_DOUBLE_EQ(e.at_large_quality.share_large, 93.0 / 200);
  EXPECT_DOUBLE_EQ(e.at_large_quality.cost, 200 + 93 * (0.25 + 10 - 1));
  Interval c, r;
  BootstrapApgr(p, 200, 7, &c, &r);
  EXPECT_GT(c.lo, 0.7);
  EXPECT_LT(r.hi, 0.65);
  EXPECT_GT(r.hi, 0.5);
}

TEST(RouteEval, AnUninformedConfidenceIsNoBetterThanRandom) {
  const auto p = TwoKinds(400, false);
  const CascadeEval e = EvaluateCascade(p);
  EXPECT_NEAR(e.apgr, 0.5, 0.06);
  Interval c, r;
  BootstrapApgr(p, 200, 7, &c, &r);
  EXPECT_LT(c.lo, 0.5);
  EXPECT_GT(c.hi, 0.5);
}

}  // namespace
}  // namespace tarmac::router
