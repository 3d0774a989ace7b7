// The controller on a real engine: without estimates it changes nothing; with a protected tier
// over its SLO it escalates, applies its plan through the engine's knobs and the admission
// decision (the lowest tier shed with Retry-After, the top tier never), counts and logs every
// action, and gives everything back once the SLO recovers; a route degrader is told.
#include "control/controller.h"

#include <gtest/gtest.h>

#include <thread>

#include "engine/engine_test_util.h"

namespace tarmac::control {
namespace {

using engine::FinishReason;

engine::RequestMetrics M(metrics::BucketId b, double ttft_ms) {
  engine::RequestMetrics m;
  m.bucket = b;
  m.prompt_tokens = 10;
  m.output_tokens = 8;
  m.ttft_s = ttft_ms / 1e3;
  m.e2e_s = m.ttft_s + 0.005 * 7;
  return m;
}

struct Env {
  std::shared_ptr<metrics::Registry> registry = std::make_shared<metrics::Registry>();
  std::unique_ptr<engine::EngineClient> engine;
  std::shared_ptr<SloTracker> tracker;
  std::unique_ptr<Controller> controller;
  metrics::BucketId premium;
  explicit Env(ControllerConfig c = {}) {
    testing::LoadedModel& m = testing::CachedModel(testing::kWp1m);
    engine::EngineConfig cfg;
    cfg.kv.blocks = 64;
    cfg.metrics = registry;
    cfg.model_name = "wp";
    engine = std::move(engine::EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
    tracker = std::make_shared<SloTracker>(registry, SloTargets::FromFlags({"premium=100:20"}).value(), 60, c.window_s, 0);
    controller = std::make_unique<Controller>(c, tracker, registry);
    controller->AddModel("wp", engine.get());
    premium = registry->buckets().Of({.prompt_tokens = 10, .max_tokens = 8, .temperature = 0, .task = "qa", .sla = "premium"});
  }
  // Knobs are applied at the engine's next step boundary: wait for the read-back.
  engine::EngineKnobs KnobsWhen(const std::function<bool(const engine::EngineKnobs&)>& ok) {
    for (int i = 0; i < 1000 && !ok(engine->knobs()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return engine->knobs();
  }
  double Count(const std::string& action, const std::string& reason) {
    const metrics::FamilySnapshot f = registry->Collect("tarmac:controller_actions_total", 0);
    const metrics::SeriesSnapshot* s = f.Find({"wp", action, reason});
    return s ? s->value : 0;
  }
};

TEST(ControllerTest, WithoutEstimatesNothingChanges) {
  Env e;
  const engine::EngineKnobs before = e.engine->knobs();
  // A few slow requests, fewer than min_samples: no estimate.
  for (int i = 0; i < e.controller->config().min_samples - 1; ++i)
    e.tracker->Observe("wp", M(e.premium, 5000), FinishReason::kLength, 1);
  for (int t = 0; t < 20; ++t) e.controller->Tick(1 + t * 0.5);
  EXPECT_EQ(e.engine->knobs(), before);
  EXPECT_FALSE(e.controller->Admit("wp", "standard").shed);
  EXPECT_EQ(e.controller->Admit("wp", "standard").max_tokens_cap, 0);
  const ControllerView v = e.controller->View("wp");
  EXPECT_EQ(v.level, Level::kNormal);
  EXPECT_TRUE(v.recent.empty());
  EXPECT_TRUE(v.action_counts.empty());
}

TEST(ControllerTest, ATierOverItsSloShedsTheLowestTierThenRecovers) {
  ControllerConfig c;
  c.up_ticks = 1;
  c.down_ticks = 2;
  Env e(c);
  const engine::EngineKnobs before = e.engine->knobs();
  double now = 100;
  // Slow requests keep ending: each rise has evidence from after the previous one.
  for (int t = 0; t < 3; ++t) {
    now += 0.5;
    for (int i = 0; i < 20; ++i) e.tracker->Observe("wp", M(e.premium, 400), FinishReason::kLength, now - 0.1);
    e.controller->Tick(now);
  }
  ControllerView v = e.controller->View("wp");
  ASSERT_EQ(v.level, Level::kShedding);
  const AdmitDecision shed = e.controller->Admit("wp", "standard");
  EXPECT_TRUE(shed.shed);
  EXPECT_GE(shed.retry_after_s, 1);
  EXPECT_EQ(shed.reason, "ttft_slo");
  EXPECT_EQ(shed.max_tokens_cap, c.max_tokens_cap);
  EXPECT_EQ(shed.min_priority, 1);
  EXPECT_FALSE(e.controller->Admit("wp", "premium").shed);  // the top tier is never shed
  EXPECT_FALSE(e.controller->Admit("other-model", "standard").shed);
  // Speculation off through the knobs (the engine reads them back after a step boundary).
  EXPECT_FALSE(e.KnobsWhen([](const engine::EngineKnobs& k) { return !k.speculation; }).speculation);
  EXPECT_EQ(e.Count("shed_lowest_tier", "ttft_slo"), 1);
  EXPECT_EQ(e.Count("escalate", "ttft_slo"), 3);
  EXPECT_FALSE(v.recent.empty());
  EXPECT_EQ(v.recent.back().level, Level::kShedding);
  EXPECT_EQ(e.registry->Collect("tarmac:controller_level", 0).Find({"wp"})->value, 3);
  // Fast requests after the slow ones left the control window: back down, knobs restored.
  now += c.window_s + 1;
  for (int i = 0; i < 20; ++i) e.tracker->Observe("wp", M(e.premium, 10), FinishReason::kLength, now);
  for (int t = 0; t < 8; ++t) e.controller->Tick(now += 0.5);
  v = e.controller->View("wp");
  EXPECT_EQ(v.level, Level::kNormal);
  EXPECT_FALSE(e.controller->Admit("wp", "standard").shed);
  EXPECT_EQ(e.KnobsWhen([&](const engine::EngineKnobs& k) { return k == before; }), before);
  EXPECT_EQ(e.Count("lift_shed_lowest_tier", "recovered"), 1);
}

struct RecordingDegrader final : RouteDegrader {
  bool CanRouteSmaller(const std::string& model) const override { return model == "wp"; }
  void SetRouteSmaller(const std::string& model, bool on) override { calls.emplace_back(model, on); }
  std::vector<std::pair<std::string, bool>> calls;
};

TEST(ControllerTest, TellsTheRouteDegrader) {
  ControllerConfig c;
  c.up_ticks = 1;
  c.down_ticks = 1;
  Env e(c);
  RecordingDegrader d;
  e.controller->SetRouteDegrader(&d);
  double now = 10;
  for (int t = 0; t < 2; ++t) {
    now += 0.5;
    for (int i = 0; i < 20; ++i) e.tracker->Observe("wp", M(e.premium, 400), FinishReason::kLength, now - 0.1);
    e.controller->Tick(now);
  }
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0], std::make_pair(std::string("wp"), true));
  // Still within the sparse lookback: the old requests are still the estimate.
  now += c.window_s + 1;
  for (int t = 0; t < 4; ++t) e.controller->Tick(now += 0.5);
  ASSERT_EQ(d.calls.size(), 1u);
  // Beyond it: no estimate, so the measures go.
  now += c.sparse_lookback_windows * c.window_s;
  for (int t = 0; t < 4; ++t) e.controller->Tick(now += 0.5);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_FALSE(d.calls[1].second);
}

// A tier so slow that fewer than min_samples of its requests end in one window still gets an
// estimate from its last min_samples within the lookback, and the controller acts.
TEST(ControllerTest, ASparseTierIsEstimatedOverTheLookback) {
  ControllerConfig c;
  c.up_ticks = 1;
  c.min_samples = 5;
  c.window_s = 4;
  Env e(c);
  double now = 10;
  for (int i = 0; i < 5; ++i) e.tracker->Observe("wp", M(e.premium, 900), FinishReason::kLength, now += 2.5);
  ASSERT_LT(e.tracker->Tier("wp", "premium", now).samples, c.min_samples);  // too few in one window
  e.controller->Tick(now);
  EXPECT_NE(e.controller->View("wp").level, Level::kNormal);
  c.sparse_lookback_windows = 1;  // no lookback beyond the window: no estimate, nothing happens
  Env f(c);
  now = 10;
  for (int i = 0; i < 5; ++i) f.tracker->Observe("wp", M(f.premium, 900), FinishReason::kLength, now += 2.5);
  f.controller->Tick(now);
  EXPECT_EQ(f.controller->View("wp").level, Level::kNormal);
}

TEST(ControllerTest, TheTickThreadRunsAndStops) {
  ControllerConfig c;
  c.interval_s = 0.01;
  c.window_s = 0.5;
  Env e(c);
  e.controller->Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  e.controller->Stop();
  e.controller->Stop();  // idempotent
  EXPECT_EQ(e.controller->View("wp").level, Level::kNormal);
}

}  // namespace
}  // namespace tarmac::control
