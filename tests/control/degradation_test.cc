// The degradation state machine: nothing without estimates; levels rise and fall one step at a
// time with hysteresis (no flapping between the thresholds), per cause (TTFT / TPOT, a
// protected tier, KV), the state the worst of them; the measures of each cause's level, and
// their release one level at a time; the per-bucket draft caps and their re-probe.
#include "control/degradation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tarmac::control {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ControllerConfig Cfg() {
  ControllerConfig c;
  c.up_ticks = 2;
  c.down_ticks = 3;
  c.min_samples = 5;
  return c;
}

// Premium (protected, 100 ms : 20 ms) and standard (the lowest, 1000 : 100).
ModelSignals Signals(double now, double premium_ttft_ms, double premium_tpot_ms, int64_t n = 50, double kv = 0.2) {
  ModelSignals s;
  s.now_s = now;
  s.tiers.push_back({"premium", true, 0.1, 0.02, n, n, premium_ttft_ms / 1e3, premium_tpot_ms / 1e3});
  s.tiers.push_back({"standard", false, 1.0, 0.1, n, n, 0.2, 0.03});
  s.kv_usage = kv;
  s.spec_max_k = 4;
  return s;
}

std::vector<std::string> Actions(const std::vector<Transition>& t) {
  std::vector<std::string> out;
  for (const Transition& x : t) out.push_back(x.action + "/" + x.reason);
  return out;
}

bool Has(const std::vector<Transition>& t, const std::string& action) {
  for (const Transition& x : t)
    if (x.action == action) return true;
  return false;
}

TEST(DegradationTest, NoEstimatesNoMeasures) {
  DegradationMachine m(Cfg());
  std::vector<Transition> t;
  for (int i = 0; i < 20; ++i) {
    // Far over the targets, but with fewer requests than min_samples: no estimate.
    m.Update(Signals(i, 5000, 500, /*n=*/4), &t);
  }
  EXPECT_TRUE(t.empty()) << ::testing::PrintToString(Actions(t));
  EXPECT_EQ(m.plan(), ControlPlan{});
  ModelSignals s;  // no tiers at all, KV low
  m.Update(s, &t);
  EXPECT_TRUE(t.empty());
}

// Above normal, a further rise needs the requests that ended after the last change to be over
// too: the window's p99 still shows what came before the measure.
TEST(DegradationTest, ARiseAboveNormalWaitsForEvidenceFromAfterTheLastChange) {
  DegradationMachine m(Cfg());
  double now = 0;
  auto tick = [&](double ttft_ms, int64_t n_after, double ttft_after_ms) {
    ModelSignals s = Signals(now++, ttft_ms, 10);
    s.tiers[0].samples_after = s.tiers[0].tpot_samples_after = n_after;
    s.tiers[0].p99_ttft_after_s = ttft_after_ms / 1e3;
    s.tiers[0].p99_tpot_after_s = 0.01;
    const Level l = m.Update(s, nullptr).level;
    EXPECT_TRUE(m.CheckIntegrity().ok()) << m.CheckIntegrity().message();
    return l;
  };
  // From normal the window's figures decide (nothing after the change yet: it is the first).
  // 130 ms: over the 100 ms target, not severely.
  EXPECT_EQ(tick(130, 0, kNaN), Level::kNormal);
  EXPECT_EQ(tick(130, 0, kNaN), Level::kPressured);
  // The window is over, but fewer than min_samples ended since: hold.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tick(130, 4, 300), Level::kPressured);
  // Enough ended since, and they are under the target: the measure works, hold.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tick(130, 8, 60), Level::kPressured);
  // Enough ended since and they are over: rise.
  EXPECT_EQ(tick(130, 8, 300), Level::kDegraded);
  const double changed = now - 1;
  while (now < changed + Cfg().window_s) EXPECT_EQ(tick(130, 0, kNaN), Level::kDegraded);
  // A whole window after the change without evidence (a sparse tier): the window decides.
  EXPECT_EQ(tick(130, 0, kNaN), Level::kShedding);
}

// Far over (more than severe_ratio times the target) a rise does not wait for evidence.
TEST(DegradationTest, ASevereOverloadRisesWithoutWaiting) {
  DegradationMachine m(Cfg());
  double now = 0;
  std::vector<Level> levels;
  for (int i = 0; i < 6; ++i) {
    ModelSignals s = Signals(now++, 250, 10);  // 2.5x the 100 ms target
    s.tiers[0].samples_after = s.tiers[0].tpot_samples_after = 0;
    levels.push_back(m.Update(s, nullptr).level);
  }
  EXPECT_EQ(levels, (std::vector<Level>{Level::kNormal, Level::kPressured, Level::kPressured, Level::kDegraded,
                                        Level::kDegraded, Level::kShedding}));
}

TEST(DegradationTest, RisesOneLevelPerUpTicksAndFallsOnePerDownTicks) {
  DegradationMachine m(Cfg());
  std::vector<Transition> t;
  double now = 0;
  auto tick = [&](double ttft_ms) {
    const Level l = m.Update(Signals(now++, ttft_ms, 10), &t).level;
    EXPECT_TRUE(m.CheckIntegrity().ok()) << m.CheckIntegrity().message();
    return l;
  };
  EXPECT_EQ(tick(300), Level::kNormal);
  EXPECT_EQ(tick(300), Level::kPressured);
  EXPECT_EQ(m.plan().measures.at(Measure::kDeprioritizeLowestTier), "ttft_slo");
  EXPECT_EQ(tick(300), Level::kPressured);
  EXPECT_EQ(tick(300), Level::kDegraded);
  EXPECT_TRUE(m.plan().Has(Measure::kCapMaxTokens));
  EXPECT_TRUE(m.plan().Has(Measure::kSpeculationOff));
  EXPECT_FALSE(m.plan().Has(Measure::kShedLowestTier));
  tick(300);
  EXPECT_EQ(tick(300), Level::kShedding);
  EXPECT_TRUE(m.plan().Has(Measure::kShedLowestTier));
  EXPECT_EQ(m.plan().measures.at(Measure::kShedLowestTier), "ttft_slo");
  // The protected tier's TTFT: its requests wait behind shorter prefill chunks.
  EXPECT_EQ(m.plan().measures.at(Measure::kCapBatchedTokens), "ttft_slo");
  tick(300);
  EXPECT_EQ(tick(300), Level::kShedding);  // the top
  // Between the thresholds (90 ms: under the target, above 0.8 of it): stays.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(tick(90), Level::kShedding);
  // Clear: one level down per down_ticks.
  EXPECT_EQ(tick(50), Level::kShedding);
  EXPECT_EQ(tick(50), Level::kShedding);
  EXPECT_EQ(tick(50), Level::kDegraded);
  EXPECT_FALSE(m.plan().Has(Measure::kShedLowestTier));  // one level down: no more shedding
  for (int i = 0; i < 6; ++i) tick(50);
  EXPECT_EQ(m.plan().level, Level::kNormal);
  EXPECT_TRUE(m.plan().measures.empty());
  EXPECT_TRUE(Has(t, "escalate"));
  EXPECT_TRUE(Has(t, "relax"));
  EXPECT_TRUE(Has(t, "shed_lowest_tier"));
  EXPECT_TRUE(Has(t, "lift_shed_lowest_tier"));
}

TEST(DegradationTest, AlternatingOverAndClearDoesNotFlap) {
  DegradationMachine m(Cfg());
  std::vector<Transition> t;
  for (int i = 0; i < 40; ++i) m.Update(Signals(i, i % 2 ? 300 : 50, 10), &t);
  EXPECT_EQ(m.plan().level, Level::kNormal);  // never two over ticks in a row
  EXPECT_TRUE(t.empty()) << ::testing::PrintToString(Actions(t));
}

TEST(DegradationTest, TpotCausesShorterStepsAndNoDraftsForWeakBuckets) {
  DegradationMachine m(Cfg());
  std::vector<Transition> t;
  ModelSignals s = Signals(0, 50, 40);  // premium TPOT 40 ms > 20
  s.spec.push_back({7, 400, 220});   // acceptance 0.55: below keep (0.6)
  s.spec.push_back({8, 400, 320});   // 0.8: kept
  m.Update(s, &t);
  s.now_s = 1;
  m.Update(s, &t);
  ASSERT_EQ(m.plan().level, Level::kPressured);
  EXPECT_EQ(m.plan().measures.at(Measure::kCapBatchedTokens), "tpot_slo");
  ASSERT_EQ(m.plan().k_caps.count(7), 1u);
  EXPECT_EQ(m.plan().k_caps.at(7).k, 0);
  EXPECT_EQ(m.plan().k_caps.at(7).reason, "tpot_slo");
  EXPECT_EQ(m.plan().k_caps.count(8), 0u);
  EXPECT_FALSE(m.plan().Has(Measure::kShedLowestTier));
}

TEST(DegradationTest, OnlyTheLowestTierOverShedsNobody) {
  DegradationMachine m(Cfg());
  std::vector<Transition> t;
  for (int i = 0; i < 20; ++i) {
    ModelSignals s = Signals(i, 50, 10);
    s.tiers[1].p99_ttft_s = 5.0;  // standard far over its 1 s
    m.Update(s, &t);
  }
  EXPECT_EQ(m.plan().level, Level::kShedding);
  EXPECT_FALSE(m.plan().Has(Measure::kShedLowestTier));
  EXPECT_FALSE(m.plan().Has(Measure::kCapMaxTokens));
  EXPECT_FALSE(m.plan().Has(Measure::kDeprioritizeLowestTier));
}

TEST(DegradationTest, KvLadderHoldsThenEvictsThenPreempts) {
  DegradationMachine m(Cfg());
  std::vector<Transition> t;
  double now = 0;
  auto tick = [&](double kv) {
    const Level l = m.Update(Signals(now++, 50, 10, 50, kv), &t).level;
    EXPECT_TRUE(m.CheckIntegrity().ok()) << m.CheckIntegrity().message();
    return l;
  };
  tick(0.95);
  EXPECT_EQ(tick(0.95), Level::kPressured);
  EXPECT_EQ(m.plan().measures.at(Measure::kHoldLowPriority), "kv_high");
  EXPECT_FALSE(m.plan().Has(Measure::kEvictCached));
  tick(0.95);
  EXPECT_EQ(tick(0.95), Level::kDegraded);
  EXPECT_TRUE(m.plan().Has(Measure::kEvictCached));
  EXPECT_FALSE(m.plan().Has(Measure::kCapMaxTokens));  // the SLOs are fine
  tick(0.95);
  EXPECT_EQ(tick(0.95), Level::kShedding);
  EXPECT_TRUE(m.plan().Has(Measure::kPreemptLowPriority));
  EXPECT_FALSE(m.plan().Has(Measure::kShedLowestTier));
  // 0.8 is between the watermarks: nothing changes; below 0.7 it relaxes.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(tick(0.8), Level::kShedding);
  // Released one level per down_ticks clear ticks: preemption first, holding back last.
  for (int i = 0; i < 3; ++i) tick(0.3);
  EXPECT_EQ(m.plan().level, Level::kDegraded);
  EXPECT_FALSE(m.plan().Has(Measure::kPreemptLowPriority));
  EXPECT_TRUE(m.plan().Has(Measure::kEvictCached));
  for (int i = 0; i < 3; ++i) tick(0.3);
  EXPECT_FALSE(m.plan().Has(Measure::kEvictCached));
  EXPECT_TRUE(m.plan().Has(Measure::kHoldLowPriority));
  for (int i = 0; i < 3; ++i) tick(0.3);
  EXPECT_EQ(m.plan().level, Level::kNormal);
  EXPECT_TRUE(m.plan().measures.empty());
}

TEST(DegradationTest, EachCauseKeepsItsOwnLevel) {
  DegradationMachine m(Cfg());
  std::vector<Transition> t;
  double now = 0;
  // KV pressure all along; the protected tier's TTFT over for a while only.
  for (int i = 0; i < 6; ++i) m.Update(Signals(now++, 300, 10, 50, 0.95), &t);
  ASSERT_EQ(m.plan().level, Level::kShedding);
  EXPECT_TRUE(m.plan().Has(Measure::kShedLowestTier));
  EXPECT_TRUE(m.plan().Has(Measure::kPreemptLowPriority));
  for (int i = 0; i < 9; ++i) {
    m.Update(Signals(now++, 50, 10, 50, 0.95), &t);
    EXPECT_TRUE(m.CheckIntegrity().ok()) << m.CheckIntegrity().message();
  }
  // The TTFT cause is back to normal: its measures are gone though KV keeps the state up.
  EXPECT_EQ(m.plan().level, Level::kShedding);
  EXPECT_FALSE(m.plan().Has(Measure::kShedLowestTier));
  EXPECT_FALSE(m.plan().Has(Measure::kDeprioritizeLowestTier));
  EXPECT_TRUE(m.plan().Has(Measure::kPreemptLowPriority));
}

TEST(DegradationTest, LowAcceptanceCapsTheBucketAndReprobes) {
  ControllerConfig c = Cfg();
  c.spec_reprobe_s = 30;
  DegradationMachine m(c);
  std::vector<Transition> t;
  ModelSignals s = Signals(0, 50, 10);
  s.spec = {{3, 500, 100}, {4, 500, 200}, {5, 500, 400}, {6, 20, 0}};  // 0.2, 0.4, 0.8, too few
  m.Update(s, &t);
  ASSERT_EQ(m.plan().k_caps.size(), 2u);
  EXPECT_EQ(m.plan().k_caps.at(3).k, 0);
  EXPECT_EQ(m.plan().k_caps.at(3).reason, "low_acceptance");
  EXPECT_EQ(m.plan().k_caps.at(4).k, 2);  // halved
  EXPECT_EQ(m.plan().level, Level::kNormal);
  // Capped, bucket 3 drafts nothing: the cap stays until the re-probe time.
  s.spec = {{4, 500, 200}};
  for (int i = 1; i < 30; ++i) {
    s.now_s = i;
    m.Update(s, &t);
  }
  EXPECT_EQ(m.plan().k_caps.count(3), 1u);
  s.now_s = 30;
  t.clear();
  m.Update(s, &t);
  EXPECT_EQ(m.plan().k_caps.count(3), 0u);
  EXPECT_TRUE(Has(t, "lift_spec_bucket_k"));
  // Bucket 4 was re-probed at the same time and, still low, capped again.
  EXPECT_EQ(m.plan().k_caps.count(4), 1u);
}

TEST(DegradationTest, NoSpeculationNoCaps) {
  DegradationMachine m(Cfg());
  ModelSignals s = Signals(0, 50, 10);
  s.spec_max_k = 0;
  s.spec = {{3, 500, 10}};
  m.Update(s, nullptr);
  EXPECT_TRUE(m.plan().k_caps.empty());
}

TEST(DegradationTest, RouteSmallerOnlyWhereARouteAllowsIt) {
  for (bool can : {false, true}) {
    DegradationMachine m(Cfg());
    for (int i = 0; i < 4; ++i) {
      ModelSignals s = Signals(i, 300, 10);
      s.can_route_smaller = can;
      m.Update(s, nullptr);
    }
    ASSERT_EQ(m.plan().level, Level::kDegraded);
    EXPECT_EQ(m.plan().Has(Measure::kRouteSmaller), can);
  }
}

TEST(DegradationTest, ConfigErrorsNameTheFlag) {
  ControllerConfig c;
  c.kv_low = 0.95;
  EXPECT_EQ(c.Validate().field(), "--kv-low-watermark");
  c = ControllerConfig{};
  c.window_s = 0.1;
  c.interval_s = 1;
  EXPECT_EQ(c.Validate().field(), "--controller-window");
  c = ControllerConfig{};
  c.min_samples = 0;
  EXPECT_EQ(c.Validate().field(), "--controller-min-samples");
  c = ControllerConfig{};
  c.severe_ratio = 1;
  EXPECT_EQ(c.Validate().field(), "controller_severe_ratio");
  EXPECT_TRUE(ControllerConfig{}.Validate().ok());
}

}  // namespace
}  // namespace tarmac::control
