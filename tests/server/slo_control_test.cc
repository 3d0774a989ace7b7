// The server's side of the controller: with none, a request passes untouched; a shed tier is a
// 429 with Retry-After (counted as rejected, reason "shed"); a capped tier's max_tokens (or its
// default) is lowered to the cap; the top tier is never touched.
#include "server/slo_control.h"

#include <gtest/gtest.h>

#include "control/controller.h"
#include "engine/engine_test_util.h"

namespace tarmac::server {
namespace {

GenRequest Req(const std::string& sla, std::optional<int32_t> max_tokens) {
  GenRequest r;
  r.model = "wp";
  r.spec.sla = sla;
  r.spec.max_tokens = max_tokens;
  return r;
}

TEST(SloControlTest, NoControllerNoChange) {
  auto registry = std::make_shared<metrics::Registry>();
  ServerMetrics sm(registry);
  GenRequest r = Req("batch", 500);
  EXPECT_FALSE(ApplyController(nullptr, r.model, &r, &sm).has_value());
  EXPECT_EQ(r.spec.max_tokens, 500);
}

TEST(SloControlTest, ShedsAndCapsTheLowestTierOnly) {
  auto registry = std::make_shared<metrics::Registry>();
  testing::LoadedModel& m = testing::CachedModel(testing::kWp1m);
  engine::EngineConfig cfg;
  cfg.kv.blocks = 32;
  cfg.metrics = registry;
  cfg.model_name = "wp";
  auto engine = std::move(engine::EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  auto tracker = std::make_shared<control::SloTracker>(registry, control::SloTargets::FromFlags({"premium=100:20"}).value(),
                                                       60, 10, 0);
  control::ControllerConfig cc;
  cc.up_ticks = 1;
  cc.max_tokens_cap = 32;
  control::Controller controller(cc, tracker, registry);
  controller.AddModel("wp", engine.get());
  ServerMetrics sm(registry);
  const metrics::BucketId b = registry->buckets().Of({.prompt_tokens = 4, .max_tokens = 8, .temperature = 0, .task = "qa", .sla = "premium"});
  engine::RequestMetrics slow;
  slow.bucket = b;
  slow.output_tokens = 4;
  slow.ttft_s = 0.5;
  slow.e2e_s = 0.6;
  for (int i = 0; i < 20; ++i) tracker->Observe("wp", slow, engine::FinishReason::kLength, 5);
  controller.Tick(5.5);  // pressured: the lowest tiers in the low priority class
  GenRequest early = Req("standard", 500), urgent = Req("standard", 500), top0 = Req("premium", 500);
  urgent.spec.priority = -5;
  EXPECT_FALSE(ApplyController(&controller, early.model, &early, &sm).has_value());
  EXPECT_EQ(early.spec.priority, 1);
  EXPECT_EQ(early.spec.max_tokens, 500);
  EXPECT_FALSE(ApplyController(&controller, urgent.model, &urgent, &sm).has_value());
  EXPECT_EQ(urgent.spec.priority, 1);
  EXPECT_FALSE(ApplyController(&controller, top0.model, &top0, &sm).has_value());
  EXPECT_EQ(top0.spec.priority, 0);
  controller.Tick(6.0);  // degraded: the max_tokens cap
  GenRequest capped = Req("standard", 500), dflt = Req("", std::nullopt), small = Req("standard", 8);
  EXPECT_FALSE(ApplyController(&controller, capped.model, &capped, &sm).has_value());
  EXPECT_EQ(capped.spec.max_tokens, 32);
  EXPECT_FALSE(ApplyController(&controller, dflt.model, &dflt, &sm).has_value());  // "" is the default tier, standard
  EXPECT_EQ(dflt.spec.max_tokens, 32);
  EXPECT_FALSE(ApplyController(&controller, small.model, &small, &sm).has_value());
  EXPECT_EQ(small.spec.max_tokens, 8);
  controller.Tick(6.5);  // shedding
  GenRequest shed = Req("standard", 500), top = Req("premium", 500);
  auto e = ApplyController(&controller, shed.model, &shed, &sm);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 429);
  EXPECT_GE(e->retry_after_s, 1);
  EXPECT_EQ(e->code, "slo_shed");
  EXPECT_NE(e->message.find("standard"), std::string::npos);
  EXPECT_FALSE(ApplyController(&controller, top.model, &top, &sm).has_value());
  EXPECT_EQ(top.spec.max_tokens, 500);
  EXPECT_EQ(registry->Collect("tarmac:requests_rejected_total", 0).Find({"shed"})->value, 1);
}

}  // namespace
}  // namespace tarmac::server
