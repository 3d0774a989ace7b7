// SloTracker: attainment against the tier's targets (both TTFT and TPOT; cancelled requests
// not judged, errors missed), the report window against since start, and a tier's p99 over the
// control window.
#include "control/slo_tracker.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tarmac::control {
namespace {

using engine::FinishReason;

struct Env {
  std::shared_ptr<metrics::Registry> registry = std::make_shared<metrics::Registry>();
  metrics::BucketId premium, batch;
  std::unique_ptr<SloTracker> tracker;
  Env() {
    premium = registry->buckets().Of({.prompt_tokens = 10, .max_tokens = 16, .temperature = 0, .task = "qa", .sla = "premium"});
    batch = registry->buckets().Of({.prompt_tokens = 10, .max_tokens = 16, .temperature = 0, .task = "qa", .sla = "batch"});
    tracker = std::make_unique<SloTracker>(registry, SloTargets::FromFlags({"premium=100:20"}).value(), 60, 10, 1000);
  }
};

engine::RequestMetrics M(metrics::BucketId b, double ttft_ms, double tpot_ms, int32_t out = 11) {
  engine::RequestMetrics m;
  m.bucket = b;
  m.prompt_tokens = 10;
  m.cached_prompt_tokens = 4;
  m.output_tokens = out;
  m.ttft_s = ttft_ms / 1e3;
  m.e2e_s = m.ttft_s + tpot_ms / 1e3 * (out - 1);
  return m;
}

TEST(SloTrackerTest, AttainmentNeedsBothTargets) {
  Env e;
  SloTracker& t = *e.tracker;
  t.Observe("m", M(e.premium, 50, 10), FinishReason::kLength, 1001);   // met
  t.Observe("m", M(e.premium, 150, 10), FinishReason::kStop, 1001);    // TTFT missed
  t.Observe("m", M(e.premium, 50, 30), FinishReason::kLength, 1001);   // TPOT missed
  t.Observe("m", M(e.premium, 50, 10, 1), FinishReason::kLength, 1001);  // one token: no TPOT, met
  t.Observe("m", M(e.premium, 50, 10), FinishReason::kCancelled, 1001);  // not judged
  t.Observe("m", M(e.premium, 50, 10), FinishReason::kError, 1001);      // missed
  t.Observe("m", M(e.batch, 9999, 999), FinishReason::kLength, 1001);    // no targets
  const auto b = t.Buckets("m", 1002);
  const SloCounts& p = b.at(e.premium).window;
  EXPECT_EQ(p.requests, 6);
  EXPECT_EQ(p.cancelled, 1);
  EXPECT_EQ(p.errors, 1);
  EXPECT_EQ(p.judged, 5);
  EXPECT_EQ(p.met, 2);
  EXPECT_EQ(p.ttft_met, 3);
  EXPECT_EQ(p.tpot_judged, 3);
  EXPECT_EQ(p.tpot_met, 2);
  EXPECT_DOUBLE_EQ(p.attainment(), 0.4);
  EXPECT_EQ(p.cached_prompt_tokens, 24);
  const SloCounts& q = b.at(e.batch).window;
  EXPECT_EQ(q.judged, 0);
  EXPECT_TRUE(std::isnan(q.attainment()));
  EXPECT_EQ(t.Models(), std::vector<std::string>{"m"});
  EXPECT_TRUE(t.CheckIntegrity(1002).ok()) << t.CheckIntegrity(1002).message();
  EXPECT_TRUE(t.Buckets("other", 1002).empty());
}

TEST(SloTrackerTest, TheWindowForgetsWhatSinceStartKeeps) {
  Env e;
  SloTracker& t = *e.tracker;
  t.Observe("m", M(e.premium, 50, 10), FinishReason::kLength, 1001);
  t.Observe("m", M(e.premium, 500, 10), FinishReason::kLength, 1030);
  auto b = t.Buckets("m", 1040).at(e.premium);
  EXPECT_EQ(b.window.requests, 2);
  b = t.Buckets("m", 1075).at(e.premium);  // the first left the 60 s window
  EXPECT_EQ(b.window.requests, 1);
  EXPECT_EQ(b.window.met, 0);
  EXPECT_EQ(b.total.requests, 2);
  EXPECT_EQ(b.total.met, 1);
  b = t.Buckets("m", 1200).at(e.premium);
  EXPECT_EQ(b.window.requests, 0);
  EXPECT_TRUE(t.CheckIntegrity(1200).ok());
  EXPECT_EQ(b.total.output_tokens, 22);
}

TEST(SloTrackerTest, TierP99OverTheControlWindow) {
  Env e;
  SloTracker& t = *e.tracker;
  for (int i = 1; i <= 100; ++i) t.Observe("m", M(e.premium, i, i / 10.0), FinishReason::kLength, 1001);
  TierLatency l = t.Tier("m", "premium", 1002);
  EXPECT_EQ(l.samples, 100);
  EXPECT_EQ(l.tpot_samples, 100);
  EXPECT_NEAR(l.p99_ttft_s, 0.099, 1e-9);
  EXPECT_NEAR(l.p99_tpot_s, 0.0099, 1e-9);
  l = t.Tier("m", "premium", 1020);  // past the 10 s control window
  EXPECT_EQ(l.samples, 0);
  EXPECT_TRUE(std::isnan(l.p99_ttft_s));
  EXPECT_TRUE(std::isnan(t.Tier("m", "nobody", 1002).p99_ttft_s));
  // Failed and cancelled requests carry no latency.
  t.Observe("m", M(e.premium, 5000, 10), FinishReason::kError, 1030);
  t.Observe("m", M(e.premium, 5000, 10), FinishReason::kCancelled, 1030);
  EXPECT_EQ(t.Tier("m", "premium", 1030).samples, 0);
}

// A sparse tier: its last n requests that ended since a time, however many windows ago; the
// p99 by nearest rank (the largest of fewer than 100).
TEST(SloTrackerTest, RecentTierLooksBackOverTheLastRequests) {
  auto registry = std::make_shared<metrics::Registry>();
  SloTracker t(registry, SloTargets::FromFlags({"premium=100:20"}).value(), 60, 4, 0);
  const metrics::BucketId b = registry->buckets().Of({.prompt_tokens = 10, .max_tokens = 8, .sla = "premium"});
  for (int i = 0; i < 6; ++i) {
    engine::RequestMetrics m;
    m.bucket = b;
    m.prompt_tokens = 10;
    m.output_tokens = i == 5 ? 1 : 5;  // the last one has no TPOT
    m.ttft_s = 0.1 * (i + 1);
    m.e2e_s = m.ttft_s + (m.output_tokens - 1) * 0.01;
    t.Observe("wp", m, engine::FinishReason::kLength, 2.0 * i);  // one every 2 s: 0, 2, ..., 10
  }
  const int64_t in_window = t.Tier("wp", "premium", 10).samples;  // the 4 s window: 8 and 10 (6 at its edge)
  EXPECT_GE(in_window, 2);
  EXPECT_LE(in_window, 3);
  TierLatency r = t.RecentTier("wp", "premium", 4, 0);  // the last 4: 0.3 .. 0.6
  EXPECT_EQ(r.samples, 4);
  EXPECT_EQ(r.tpot_samples, 3);
  EXPECT_DOUBLE_EQ(r.p99_ttft_s, 0.6);
  EXPECT_NEAR(r.p99_tpot_s, 0.01, 1e-12);
  r = t.RecentTier("wp", "premium", 10, 5);  // only those that ended at 6, 8, 10
  EXPECT_EQ(r.samples, 3);
  EXPECT_DOUBLE_EQ(r.p99_ttft_s, 0.6);
  EXPECT_EQ(t.RecentTier("wp", "gold", 4, 0).samples, 0);
  EXPECT_TRUE(std::isnan(t.RecentTier("wp", "gold", 4, 0).p99_ttft_s));
}

TEST(SloTrackerTest, SinceStartQuantilesAreExactWhileTheSampleHoldsAll) {
  Env e;
  for (int i = 1; i <= 1000; ++i) e.tracker->Observe("m", M(e.premium, i, 1), FinishReason::kLength, 1000 + i);
  const BucketSlo b = e.tracker->Buckets("m", 3000).at(e.premium);
  EXPECT_EQ(b.window.requests, 0);  // long gone from the window
  EXPECT_EQ(b.ttft_ms.count, 1000);
  EXPECT_NEAR(b.ttft_ms.p50, 500, 1e-6);
  EXPECT_NEAR(b.ttft_ms.p99, 990, 1e-6);
  EXPECT_NEAR(b.tpot_ms.p50, 1, 1e-6);
}

TEST(SloTrackerTest, TheHookFeedsItsModel) {
  Env e;
  auto hook = e.tracker->HookFor("wp");
  hook(M(e.premium, 50, 10), FinishReason::kLength, 1001);
  EXPECT_EQ(e.tracker->Buckets("wp", 1001).at(e.premium).total.met, 1);
}

}  // namespace
}  // namespace tarmac::control
