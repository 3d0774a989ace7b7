#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <memory>
#include <random>

#include "speculative/ngram_proposer.h"
#include "speculative/spec_policy.h"

namespace tarmac::speculative {
namespace {

// Request buckets (ids as a BucketTable would intern them).
constexpr metrics::BucketId kQa = 0;
constexpr metrics::BucketId kCreative = 1;
constexpr metrics::BucketId kB = 2;
constexpr metrics::BucketId kNew = 3;
constexpr metrics::BucketId kFresh = 4;
constexpr metrics::BucketId kT = 5;
constexpr metrics::BucketId kHigh = 6;
constexpr metrics::BucketId kUnseen = 7;

TEST(NgramProposerTest, ProposesWhatFollowedTheLatestMatch) {
  NgramProposer p(1, 3);
  // ... 5 6 7 8 9 ... 5 6 7 -> 8 9 (the 3-gram "5 6 7" matched)
  std::vector<int32_t> t = {1, 5, 6, 7, 8, 9, 2, 3, 5, 6, 7};
  EXPECT_EQ(p.Lookup(t, 2), (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(p.Lookup(t, 10), (std::vector<int32_t>{8, 9, 2, 3, 5, 6, 7}));
  // Latest match wins: "4" followed by 10 earlier and by 11 later.
  t = {4, 10, 0, 4, 11, 0, 4};
  EXPECT_EQ(p.Lookup(t, 1), (std::vector<int32_t>{11}));
  // No earlier occurrence of the last token: nothing.
  t = {1, 2, 3};
  EXPECT_TRUE(p.Lookup(t, 4).empty());
  EXPECT_TRUE(p.Lookup(std::vector<int32_t>{7}, 4).empty());
}

TEST(SpecPolicyTest, SpeculatesWhenBandwidthBoundAndAcceptanceIsHigh) {
  SpecPolicyConfig cfg;
  cfg.max_k = 8;
  SpecPolicy p(cfg);
  // Bandwidth-bound target: a step costs the same for 1..16 tokens; drafts are cheap.
  for (int t : {1, 2, 4, 8, 16}) p.ObserveStep(t, 0.010);
  p.ObserveDraft(1, 0.0005);
  for (int i = 0; i < 50; ++i) p.ObserveVerify(kQa, 4, 3);  // ~75% per position
  const int32_t k = p.ChooseK(kQa, 1);
  EXPECT_GE(k, 3);
  EXPECT_GT(p.PredictSpeedup(0.75, k, 1), 2.0);
}

TEST(SpecPolicyTest, SwitchesOffWhenComputeBoundOrAcceptanceIsLow) {
  SpecPolicy p;
  // Compute-bound at large batches: time proportional to tokens above 32.
  for (int t : {1, 8, 32}) p.ObserveStep(t, 0.010);
  for (int t : {64, 128, 256, 512}) p.ObserveStep(t, 0.010 * t / 32.0);
  p.ObserveDraft(1, 0.0005);
  for (int i = 0; i < 50; ++i) p.ObserveVerify(kQa, 4, 3);
  EXPECT_GT(p.ChooseK(kQa, 1), 0);    // batch 1: still pays
  EXPECT_EQ(p.ChooseK(kQa, 64), 0);   // batch 64: verify costs (1 + k)x, off
  // Low acceptance pays at no batch size.
  for (int i = 0; i < 80; ++i) p.ObserveVerify(kCreative, 4, 0);
  EXPECT_EQ(p.ChooseK(kCreative, 1), 0);
  EXPECT_EQ(p.LastK(kCreative), 0);
}

TEST(SpecPolicyTest, NoProbesWhereStepCostsAloneRuleSpeculationOut) {
  SpecPolicyConfig cfg;
  cfg.probe_every = 2;
  SpecPolicy p(cfg);
  // Compute-bound from 32 tokens on: at batch 64 even 95% acceptance cannot pay.
  for (int t : {1, 8, 32}) p.ObserveStep(t, 0.010);
  for (int t : {64, 128, 256, 512, 1024}) p.ObserveStep(t, 0.010 * t / 32.0);
  p.ObserveDraft(1, 0.0005);
  EXPECT_FALSE(p.AcceptanceCouldPay(64, 64));
  EXPECT_TRUE(p.AcceptanceCouldPay(1, 1));
  int probes = 0;
  for (int i = 0; i < 64 * 20; ++i) probes += p.ChooseK(kB, 64, 64) > 0;
  EXPECT_EQ(probes, 0);  // not even the first probe of an unmeasured bucket
  // At batch 1 the same bucket is probed at once.
  EXPECT_GT(p.ChooseK(kB, 1, 1), 0);
}

TEST(SpecPolicyTest, UnmeasuredBucketProbesOneRequestPerStep) {
  SpecPolicy p;
  // Flat up to 64 tokens, then rising: at batch 64 the prior acceptance (0.5) does not pay,
  // 95% would, so the bucket is probed.
  for (int t : {1, 8, 64}) p.ObserveStep(t, 0.010);
  p.ObserveStep(128, 0.016);
  p.ObserveStep(256, 0.030);
  p.ObserveStep(512, 0.060);
  p.ObserveDraft(1, 0.0001, 64);  // a round for 64 requests
  ASSERT_TRUE(p.AcceptanceCouldPay(64, 64));
  ASSERT_LT(p.PredictSpeedup(0.5, 1, 64, 64), 1.0);
  // The first step: 64 decisions, before any verification is observed.
  int probes = 0;
  for (int i = 0; i < 64; ++i) probes += p.ChooseK(kNew, 64, 64) > 0;
  EXPECT_EQ(probes, 1);
  // Still nothing verified (the probe produced no draft): one more in the next step.
  probes = 0;
  for (int i = 0; i < 64; ++i) probes += p.ChooseK(kNew, 64, 64) > 0;
  EXPECT_EQ(probes, 1);
}

// The prior acceptance is not acted on: even where 0.5 would pay (flat step costs, cheap
// drafts), a bucket with no verified draft gets one probing request per step, not k > 0 for
// every request (each of which would pay a draft catch-up on a guess). Once a verification
// is observed the model decides for all of them.
TEST(SpecPolicyTest, PriorAloneIsNotActedOn) {
  SpecPolicy p;
  for (int t : {1, 8, 64, 128, 256, 512}) p.ObserveStep(t, 0.010);
  p.ObserveDraft(1, 0.0001, 41);
  ASSERT_GT(p.PredictSpeedup(0.5, 2, 41, 41), 1.1);
  int probes = 0;
  for (int i = 0; i < 41; ++i) probes += p.ChooseK(kFresh, 41, 41) > 0;
  EXPECT_EQ(probes, 1);
  for (int i = 0; i < 20; ++i) p.ObserveVerify(kFresh, 2, 1);
  int on = 0;
  for (int i = 0; i < 41; ++i) on += p.ChooseK(kFresh, 41, 41) > 0;
  EXPECT_EQ(on, 41);
}

// Without a measured draft cost the model predicts nothing (speedup 1) instead of treating
// drafts as free; the bucket is still probed (which measures it), once per step.
TEST(SpecPolicyTest, UnmeasuredDraftCostOnlyProbes) {
  SpecPolicy p;
  for (int t : {1, 8, 64, 128}) p.ObserveStep(t, 0.010);
  EXPECT_EQ(p.PredictSpeedup(0.9, 2, 32, 32), 1.0);
  EXPECT_TRUE(p.AcceptanceCouldPay(32, 32));
  int probes = 0;
  for (int i = 0; i < 32; ++i) probes += p.ChooseK(kB, 32, 32) > 0;
  EXPECT_EQ(probes, 1);
  p.ObserveDraft(1, 0.0001, 32);
  EXPECT_GT(p.PredictSpeedup(0.9, 2, 32, 32), 1.5);
  // A proposer whose rounds take no measurable time (n-gram lookups) is measured all the same.
  SpecPolicy q;
  for (int t : {1, 8, 64, 128}) q.ObserveStep(t, 0.010);
  q.ObserveDraft(3, 0.0);
  EXPECT_GT(q.PredictSpeedup(0.9, 2, 32, 32), 1.5);
}

// Above the largest measured step size the cost grows along the measured slope (at least 3/4
// of the proportional one), not in proportion: a bandwidth-bound step's fixed part is not
// scaled up with the tokens (the padded 0.58B model: 45 ms at 1 token, 95 ms at 8). With only
// batch-8 steps measured, the verify of batch 8 plus drafts was priced proportionally (16
// tokens: 190 ms) and a bucket with 50% acceptance never turned on at batch 8.
TEST(SpecPolicyTest, StepCostsAboveTheMeasuredGrowAlongTheirSlope) {
  SpecPolicyConfig no_limit;  // the other 4 requests' slowdown is another test's subject
  no_limit.max_other_slowdown = -1;
  SpecPolicy p(no_limit);
  p.ObserveStep(1, 0.045);
  p.ObserveStep(8, 0.095);
  EXPECT_NEAR(p.StepSeconds(16), 0.095 + 8 * 0.75 * 0.095 / 8, 1e-9);  // not 0.190
  EXPECT_NEAR(p.StepSeconds(4), 0.045 + 3 * 0.05 / 7, 1e-9);   // between: interpolated
  p.ObserveDraft(1, 0.001);
  for (int i = 0; i < 50; ++i) p.ObserveVerify(kQa, 2, 1);  // ~50% per position
  EXPECT_GT(p.ChooseK(kQa, 8, 4), 0);
  // A single measurement still extrapolates proportionally, and a compute-bound line is
  // proportional anyway.
  SpecPolicy one;
  one.ObserveStep(8, 0.095);
  EXPECT_NEAR(one.StepSeconds(16), 0.190, 1e-9);
  SpecPolicy compute;
  compute.ObserveStep(32, 0.010);
  compute.ObserveStep(64, 0.020);
  EXPECT_NEAR(compute.StepSeconds(192), 0.060, 1e-9);
  // Noise between nearby sizes (wp-11m at batch 64: 58 tokens took longer than 64) does not
  // make larger steps look free: the slope comes from a size at most half as large, and is
  // at least 3/4 of the proportional one. (Flat, batch 49 turned speculation on for all 49
  // requests and lost 10%.)
  SpecPolicy noisy;
  noisy.ObserveStep(1, 0.00223);  // a cold first step
  noisy.ObserveStep(58, 0.00448);
  noisy.ObserveStep(64, 0.00440);
  EXPECT_NEAR(noisy.StepSeconds(147), 0.00440 + 83 * 0.75 * 0.00440 / 64, 1e-9);
  noisy.ObserveDraft(1, 0.00045);
  for (int i = 0; i < 50; ++i) noisy.ObserveVerify(kT, 2, 1);
  EXPECT_EQ(noisy.ChooseK(kT, 49, 49), 0);
}

// The first steps of a size are averaged, not decayed from the first one: a cold first
// verify step (3x the later ones) priced into an EMA kept a paying bucket off for the rest of a
// short run, since only probes (one per 32 steps) measure that size while it is off.
TEST(SpecPolicyTest, AColdFirstStepIsAveragedAway) {
  SpecPolicy p;
  for (int i = 0; i < 20; ++i) p.ObserveStep(1, 0.010);
  p.ObserveDraft(1, 0.0005);
  for (int i = 0; i < 50; ++i) p.ObserveVerify(kB, 2, 1);  // ~50% per position
  p.ObserveStep(3, 0.030);  // the first 3-token step: cold
  EXPECT_EQ(p.ChooseK(kB, 1, 1), 0);
  for (int i = 0; i < 3; ++i) p.ObserveStep(3, 0.010);
  // The faster steps show the first was an outlier: the average is held at 1.5x the fastest
  // (15 ms) before the three are averaged in: (15 + 10) / 2, then 1/3, 1/4 weights: 11.25 ms
  // (the plain average: 15; an EMA: 24.6).
  EXPECT_NEAR(p.StepSeconds(3), 0.01125, 1e-12);
  EXPECT_GE(p.ChooseK(kB, 1, 1), 1);  // k = 1: 1.5 x 10 / (11.25 + 0.5) ms = 1.28x
  // Past ten observations a bin decays again (weight 1/10); a slow step counts at most 1.5x
  // the bin's fastest (10 ms, drifted up 2%).
  for (int i = 0; i < 6; ++i) p.ObserveStep(3, 0.010);
  const double before = p.StepSeconds(3);
  p.ObserveStep(3, 0.020);
  EXPECT_NEAR(p.StepSeconds(3), 0.9 * before + 0.1 * 1.5 * 0.0102, 1e-12);
  // A slower machine is followed: steps that stay 2x slower raise the price step by step.
  for (int i = 0; i < 60; ++i) p.ObserveStep(3, 0.020);
  EXPECT_GT(p.StepSeconds(3), 0.019);
}

// A draft round's price grows with the requests drafting in it. Measured on single-request
// rounds (probes) only, a round for 49 requests is priced at 49 of them, not one: priced as
// one, batch 49 turned a 50% bucket on for all 49 requests and lost 4-9%.
TEST(SpecPolicyTest, DraftRoundsArePricedByTheirRequests) {
  SpecPolicy p;
  // wp-11m's measured steps: 49 tokens 4.55 ms, 98 tokens 6.0 ms; probes' rounds 57 us.
  p.ObserveStep(49, 0.00455);
  p.ObserveStep(98, 0.0060);
  p.ObserveDraft(2, 0.000114);  // two rounds of one request
  EXPECT_NEAR(p.DraftRoundSeconds(1), 0.000057, 1e-12);
  EXPECT_NEAR(p.DraftRoundSeconds(49), 49 * 0.000057, 1e-12);
  for (int i = 0; i < 50; ++i) p.ObserveVerify(kT, 1, 1), p.ObserveVerify(kT, 1, 0);
  // k = 1 for all 49: 1.5 · 4.55 / (6.0 + 2.8) = 0.78 (priced as one request: 1.13).
  EXPECT_LT(p.PredictSpeedup(0.5, 1, 49, 49), 0.8);
  EXPECT_EQ(p.ChooseK(kT, 49, 49), 0);
  // Measured at 32 requests too: interpolated between, proportional beyond.
  p.ObserveDraft(1, 0.0004, 32);
  EXPECT_NEAR(p.DraftRoundSeconds(32), 0.0004, 1e-12);
  EXPECT_NEAR(p.DraftRoundSeconds(64), 0.0008, 1e-12);
  EXPECT_GT(p.DraftRoundSeconds(8), 0.00005);
  EXPECT_LT(p.DraftRoundSeconds(8), 0.0004);
}

// A bucket shares its steps with the batch's other requests: its k stays where drafting and
// verification lengthen their step by at most max_other_slowdown. Padded-target-like costs
// (2 threads): 62 ms at 1 token, 64 at 2, 68 at 3, 72 at 4, 105 at 8, 120 at 16.
TEST(SpecPolicyTest, OtherRequestsStepStaysWithinTheSlowdownLimit) {
  auto make = [](double limit) {
    SpecPolicyConfig cfg;
    cfg.max_other_slowdown = limit;
    auto p = std::make_unique<SpecPolicy>(cfg);
    const double ms[][2] = {{1, 62}, {2, 64}, {3, 68}, {4, 72}, {8, 105}, {16, 120}};
    for (const auto& m : ms) p->ObserveStep(static_cast<int32_t>(m[0]), m[1] * 1e-3);
    p->ObserveDraft(1, 0.0005);
    for (int i = 0; i < 60; ++i) p->ObserveVerify(kHigh, 4, 3);  // ~75% per position
    return p;
  };
  const auto p = make(0.05);
  // Alone in the batch: no one else to slow down, k as the speedup model says.
  EXPECT_GE(p->ChooseK(kHigh, 1, 1), 2);
  // 4 of 8: any k adds >= 4 tokens to a 105 ms step (12 tokens: +7% and more): off.
  EXPECT_GT(p->StepSlowdown(1, 8, 4), 1.05);
  EXPECT_EQ(p->ChooseK(kHigh, 8, 4), 0);
  // 1 of 2: k = 1 makes the step 3 tokens (+6.7%): over the limit, though the bucket's own
  // predicted gain is over 1.2x; the limit decides.
  EXPECT_GT(p->StepSlowdown(1, 2, 1), 1.05);
  EXPECT_GT(p->PredictSpeedup(p->AcceptanceEstimate(kHigh), 1, 2, 1), 1.2);
  EXPECT_EQ(p->ChooseK(kHigh, 2, 1), 0);
  // With the limit at 10% the same bucket speculates at 1 of 2, and with no limit it takes
  // the k that maximises its own speedup at 4 of 8.
  EXPECT_GE(make(0.10)->ChooseK(kHigh, 2, 1), 1);
  EXPECT_LE(make(0.10)->StepSlowdown(make(0.10)->ChooseK(kHigh, 2, 1), 2, 1), 1.10);
  EXPECT_GT(make(-1)->ChooseK(kHigh, 8, 4), 0);
  // A bucket deciding after another prices its step on top of the other's drafts: 1 of 2
  // with 2 drafts of the other request already in the step is a 4-token step, and k = 1
  // makes it 5, not 2 -> 3 (log2 bins average 2 and 3 tokens, hence StepSeconds).
  EXPECT_NEAR(p->StepSlowdown(1, 2, 1, 2), (0.0005 + p->StepSeconds(5)) / p->StepSeconds(4), 1e-9);
  EXPECT_NEAR(p->StepSlowdown(1, 2, 1), (0.0005 + p->StepSeconds(3)) / p->StepSeconds(2), 1e-9);
  EXPECT_GT(p->StepSlowdown(1, 2, 1, 2), p->StepSlowdown(1, 2, 1));
  const double a = p->AcceptanceEstimate(kHigh);
  EXPECT_NEAR(p->PredictSpeedup(a, 1, 2, 1, 2),
              (1 + a) * p->StepSeconds(4) / (0.0005 + p->StepSeconds(5)), 1e-9);
  EXPECT_DOUBLE_EQ(p->AcceptanceEstimate(kUnseen), 0.5);
  // No probe where the limit leaves no k: 8 requests, 4 of them this (unmeasured) bucket.
  EXPECT_FALSE(p->AcceptanceCouldPay(8, 4));
  int probes = 0;
  for (int i = 0; i < 8 * 100; ++i) probes += p->ChooseK(kFresh, 8, 4) > 0;
  EXPECT_EQ(probes, 0);
}

TEST(SpecPolicyTest, SwitchedOffBucketIsReprobed) {
  SpecPolicyConfig cfg;
  cfg.probe_every = 10;
  SpecPolicy p(cfg);
  for (int t : {1, 2, 4, 8}) p.ObserveStep(t, 0.010);
  p.ObserveDraft(1, 0.002);
  for (int i = 0; i < 80; ++i) p.ObserveVerify(kB, 4, 0);
  int probes = 0;
  for (int i = 0; i < 30; ++i) probes += p.ChooseK(kB, 1) > 0;
  EXPECT_EQ(probes, 3);
  // Acceptance recovers: the bucket turns back on.
  for (int i = 0; i < 300; ++i) p.ObserveVerify(kB, 2, 2);
  EXPECT_GT(p.ChooseK(kB, 1), 0);
}

// Trees' expected tokens: with no sibling hits a tree is its spine's chain; a hit at the
// position where the spine failed adds that token and the bonus token.
TEST(SpecPolicyTest, TreeExpectedTokens) {
  const std::array<double, kMaxWidth + 1> none{}, half{0, 0.5, 0.6, 0.65, 0.7};
  for (double a : {0.0, 0.3, 0.8}) {
    for (int32_t k : {1, 3, 6}) {
      EXPECT_NEAR(SpecPolicy::ExpectedTokens(a, none, {k, 2, 2}), (1 - std::pow(a, k + 1)) / (1 - a), 1e-12);
    }
    // k = 1, one sibling: spine accepted (a): 2 tokens; else 1 + h.
    EXPECT_NEAR(SpecPolicy::ExpectedTokens(a, half, {1, 1, 1}), a * 2 + (1 - a) * 1.5, 1e-12);
    // k = 2, two siblings at the first position only.
    EXPECT_NEAR(SpecPolicy::ExpectedTokens(a, half, {2, 2, 1}),
                (1 - a) * (1 + 0.6) + a * (1 - a) * 2 + a * a * 3, 1e-12);
  }
  EXPECT_EQ((TreeShape{3, 2, 2}).Nodes(), 7);
  EXPECT_EQ((TreeShape{1, 3, 2}).Nodes(), 4);
}

// Bandwidth-bound steps (padded-target-like: 16 tokens cost twice one): with siblings that
// hit the policy picks a tree; with siblings that never hit, a chain; at batch 64 on a
// compute-bound curve, nothing. Siblings are priced only once measured.
TEST(SpecPolicyTest, ChoosesTreesWhereSiblingsPay) {
  SpecPolicyConfig cfg;
  cfg.max_width = 3;
  cfg.max_branch = 3;
  SpecPolicy p(cfg);
  const double ms[][2] = {{1, 62}, {2, 64}, {3, 68}, {4, 72}, {8, 80}, {16, 120}, {64, 480}, {128, 960}};
  for (const auto& m : ms) p.ObserveStep(static_cast<int32_t>(m[0]), m[1] * 1e-3);
  p.ObserveDraft(1, 0.0008);
  for (int i = 0; i < 60; ++i) p.ObserveVerify(kQa, 3, 1), p.ObserveVerify(kQa, 3, 2);  // a ~0.6
  EXPECT_FALSE(p.ChooseShape(kQa, 1).tree());  // siblings unmeasured: a chain
  for (int i = 0; i < 60; ++i) p.ObserveSibling(kQa, i % 2 == 0 ? 0 : (i % 3 == 0 ? 1 : -1), 3);
  const TreeShape t = p.ChooseShape(kQa, 1);
  EXPECT_TRUE(t.tree()) << t.depth << " " << t.width << "x" << t.branch;
  EXPECT_LE(t.Nodes(), cfg.max_tree_tokens);
  EXPECT_FALSE(p.ChooseShape(kQa, 1, -1, 0, -1, /*allow_trees=*/false).tree());
  for (int i = 0; i < 60; ++i) p.ObserveVerify(kB, 3, 1), p.ObserveVerify(kB, 3, 2), p.ObserveSibling(kB, -1, 3);
  const TreeShape c = p.ChooseShape(kB, 1);
  EXPECT_GT(c.depth, 0);
  EXPECT_FALSE(c.tree());
  EXPECT_EQ(p.ChooseShape(kQa, 64).depth, 0);
}

// Learning and noise: a simulated bucket (acceptance 0.6 per position, siblings hitting
// 35/45/50% at widths 1/2/3) on the padded target's step curve, with step times that vary
// ±25% and now and then triple (a busy host). From the 32nd verification on, the shapes the
// policy picks give (in true expectation) at least 95% of the best fixed shape's speedup.
TEST(SpecPolicyTest, AutoComesWithinFivePercentOfTheBestShapeUnderNoise) {
  const double a = 0.6;
  const std::array<double, kMaxWidth + 1> hit{0, 0.35, 0.45, 0.5, 0.5};
  const double ms[][2] = {{1, 62}, {2, 64}, {3, 68}, {4, 72}, {8, 80}, {16, 95}, {32, 150}};
  auto true_step = [&](int32_t n) {
    for (size_t i = 0; i + 1 < std::size(ms); ++i)
      if (n <= ms[i + 1][0]) {
        const double f = (n - ms[i][0]) / (ms[i + 1][0] - ms[i][0]);
        return (ms[i][1] + f * (ms[i + 1][1] - ms[i][1])) * 1e-3;
      }
    return ms[std::size(ms) - 1][1] * 1e-3;
  };
  const double draft_s = 0.001;
  auto true_speedup = [&](const TreeShape& s) {
    return SpecPolicy::ExpectedTokens(a, hit, s) * true_step(1) / (s.depth * draft_s + true_step(1 + s.Nodes()));
  };
  SpecPolicyConfig cfg;
  cfg.max_k = 6;
  cfg.max_width = 3;
  cfg.max_branch = 3;
  double best = 1;
  for (int32_t k = 1; k <= cfg.max_k; ++k)
    for (int32_t w = 0; w <= cfg.max_width; ++w)
      for (int32_t b = w == 0 ? 0 : 1; b <= (w == 0 ? 0 : std::min(k, cfg.max_branch)); ++b)
        if (TreeShape{k, w, b}.Nodes() <= cfg.max_tree_tokens) best = std::max(best, true_speedup({k, w, b}));
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    SpecPolicy p(cfg);
    int verifies = 0;
    double tokens = 0, seconds = 0;  // true expectations of the shapes chosen after 32 verifications
    for (int step = 0; step < 200; ++step) {
      const TreeShape s = p.ChooseShape(kQa, 1, 1);
      auto noisy = [&](double t) { return t * (0.75 + 0.5 * u(rng)) * (u(rng) < 0.05 ? 3 : 1); };
      if (s.depth > 0) p.ObserveDraft(1, noisy(draft_s));
      p.ObserveStep(1 + s.Nodes(), noisy(true_step(1 + s.Nodes())));
      if (verifies >= 32) {
        tokens += SpecPolicy::ExpectedTokens(a, hit, s);
        seconds += s.depth * draft_s + true_step(1 + s.Nodes());
      }
      if (s.depth == 0) continue;
      ++verifies;
      int32_t acc = 0;
      while (acc < s.depth && u(rng) < a) ++acc;
      p.ObserveVerify(kQa, s.depth, acc);
      if (acc < s.depth) {
        // The target's token among the draft's 3 siblings: rank 0 with h(1), 1 with h(2) - h(1)...
        const double x = u(rng);
        const int32_t rank = x < hit[1] ? 0 : x < hit[2] ? 1 : x < hit[3] ? 2 : -1;
        p.ObserveSibling(kQa, rank, 3);
      }
    }
    const double got = tokens * true_step(1) / seconds / best;
    EXPECT_GT(verifies, 150) << "seed " << seed;
    EXPECT_GE(got, 0.95) << "seed " << seed << " (best fixed shape " << best << "x)";
    std::printf("seed %u: after 32 verifications %.3f of the best fixed shape's speedup (%.2fx)\n", seed, got, best);
  }
}

}  // namespace
}  // namespace tarmac::speculative
