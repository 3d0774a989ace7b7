// The SLO report: histogram quantiles against a sorted reference, and a report built from the
// engine's own series (EngineMetrics records them as the engine does) plus the tracker: the
// bucket's labels, window and since-start latencies, attainment, tokens and speculation, and
// the JSON the table reads.
#include "control/slo_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "control/slo_table.h"
#include "engine/engine_metrics.h"

namespace tarmac::control {
namespace {

TEST(SloReportTest, HistogramQuantileInterpolatesWithinTheBucket) {
  const std::vector<double> bounds = {0.1, 0.2, 0.4, 0.8};
  metrics::Histogram h(bounds);
  EXPECT_TRUE(std::isnan(HistogramQuantile(h.Read(), 0.5)));
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.0, 0.8);
  std::vector<double> v;
  for (int i = 0; i < 20000; ++i) {
    v.push_back(u(rng));
    h.Observe(v.back());
  }
  std::sort(v.begin(), v.end());
  for (double q : {0.1, 0.5, 0.9, 0.99}) {
    const double ref = v[static_cast<size_t>(q * (v.size() - 1))];
    EXPECT_NEAR(HistogramQuantile(h.Read(), q), ref, 0.01) << q;  // uniform within buckets: close
  }
  metrics::Histogram tail(bounds);
  tail.Observe(5.0);  // in +Inf: the largest finite bound
  EXPECT_DOUBLE_EQ(HistogramQuantile(tail.Read(), 0.5), 0.8);
}

TEST(SloReportTest, BuiltFromTheEnginesSeriesAndTheTracker) {
  auto registry = std::make_shared<metrics::Registry>();
  engine::EngineMetrics em(registry, "wp");
  SloTracker tracker(registry, SloTargets::FromFlags({"premium=100:20"}).value(), 60, 10, 0);
  const metrics::BucketId b =
      registry->buckets().Of({.prompt_tokens = 200, .max_tokens = 32, .temperature = 0, .task = "qa", .sla = "premium"});
  for (int i = 0; i < 10; ++i) {
    engine::RequestMetrics m;
    m.bucket = b;
    m.prompt_tokens = 200;
    m.cached_prompt_tokens = 64;
    m.output_tokens = 11;
    m.ttft_s = (i < 8 ? 50 : 300) / 1e3;  // two miss the TTFT target
    m.e2e_s = m.ttft_s + 10 * 0.01;
    em.RequestFinished(m, engine::FinishReason::kLength, 5);
    tracker.Observe("wp", m, engine::FinishReason::kLength, 5);
  }
  em.SpecDecision(b, 3);
  em.SpecDecision(b, 0);
  em.SpecVerified(b, 3, 2);
  em.StepDone();
  const SloReport r2 = BuildSloReport(*registry, &tracker, nullptr, 10);
  ASSERT_EQ(r2.models.size(), 1u);
  const ModelReport& m = r2.models[0];
  EXPECT_EQ(m.name, "wp");
  ASSERT_EQ(m.buckets.size(), 1u);
  const BucketReport& br = m.buckets[0];
  EXPECT_EQ(br.key, registry->buckets().Key(b));
  ASSERT_TRUE(br.slo.has_value());
  EXPECT_EQ(br.slo->name, "premium");
  EXPECT_EQ(br.window.requests, 10);
  EXPECT_EQ(br.window.ttft_ms.count, 10);
  EXPECT_NEAR(br.window.ttft_ms.p50, 50, 1e-9);
  EXPECT_NEAR(br.window.ttft_ms.p99, 300, 1e-9);
  EXPECT_NEAR(br.window.tpot_ms.p50, 10, 1e-9);
  EXPECT_EQ(br.total.requests, 10);
  EXPECT_DOUBLE_EQ(br.window.counts.attainment(), 0.8);
  EXPECT_EQ(br.window.counts.cached_prompt_tokens, 640);
  EXPECT_EQ(br.draft_tokens, 3);
  EXPECT_EQ(br.accepted_tokens, 2);
  EXPECT_EQ(br.spec_fallbacks, 1);
  EXPECT_DOUBLE_EQ(m.route_share, 1.0);
  EXPECT_GT(br.window.output_tokens_per_s, 0);
  // The tier's p99s over the control window (nearest rank: the slowest of 10), as the
  // controller judges them, with or without one.
  ASSERT_EQ(m.tiers.size(), 1u);
  EXPECT_EQ(m.tiers[0].first, "premium");
  EXPECT_EQ(m.tiers[0].second.samples, 10);
  EXPECT_NEAR(m.tiers[0].second.p99_ttft_s, 0.3, 1e-9);
  EXPECT_NEAR(m.tiers[0].second.p99_tpot_s, 0.01, 1e-9);

  const nlohmann::json j = nlohmann::json::parse(ToJson(r2).dump());
  EXPECT_EQ(j["object"], "slo_report");
  EXPECT_EQ(j["control_window_s"], 10);
  const nlohmann::json& jt = j["models"][0]["control_window_tiers"][0];
  EXPECT_EQ(jt["tier"], "premium");
  EXPECT_NEAR(jt["p99_ttft_ms"].get<double>(), 300, 1e-6);
  EXPECT_EQ(jt["ttft_target_ms"], 100);
  EXPECT_EQ(jt["tpot_target_ms"], 20);
  EXPECT_EQ(j["tiers"][0]["name"], "premium");
  EXPECT_FALSE(j["controller"]["enabled"].get<bool>());
  const nlohmann::json& jb = j["models"][0]["buckets"][0];
  EXPECT_EQ(jb["labels"]["task"], "qa");
  EXPECT_EQ(jb["labels"]["sla"], "premium");
  EXPECT_DOUBLE_EQ(jb["window"]["slo_attainment"].get<double>(), 0.8);
  EXPECT_EQ(jb["speculation"]["rejected_tokens"], 1);
  EXPECT_DOUBLE_EQ(jb["speculation"]["fallback_rate"].get<double>(), 0.5);
  EXPECT_TRUE(j["models"][0]["route"]["escalation_rate"].is_null());  // nothing routed
  EXPECT_EQ(j["models"][0]["route"]["requests"], 0);
  EXPECT_TRUE(j["routes"].empty());
  const std::string table = RenderSloTable(j);
  EXPECT_NE(table.find("model wp"), std::string::npos) << table;
  EXPECT_NE(table.find("premium"), std::string::npos);
  EXPECT_NE(table.find("80.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("controller: off"), std::string::npos) << table;
  EXPECT_NE(table.find("tiers over the last 10 s (p99 / target, requests): premium TTFT 300.0/100 ms TPOT 10.00/20 ms (10)"),
            std::string::npos) << table;
}

// The router's series (tarmac:route_requests_total{route, model_name, outcome, bucket...}) give
// each route's escalation and fallback rates and model shares, overall and per bucket, and each
// model's bucket its routed counts.
TEST(SloReportTest, RouteAndEscalationRatesFromTheRoutersSeries) {
  auto registry = std::make_shared<metrics::Registry>();
  engine::EngineMetrics small(registry, "small"), large(registry, "large");
  std::vector<std::string> names = {"route", "model_name", "outcome"};
  for (const std::string& n : metrics::BucketTable::LabelNames()) names.push_back(n);
  auto& routed = registry->Counters("tarmac:route_requests_total", "routed", names);
  const metrics::BucketId qa = registry->buckets().Of({.prompt_tokens = 20, .max_tokens = 16, .task = "qa"});
  const metrics::BucketId chat = registry->buckets().Of({.prompt_tokens = 900, .max_tokens = 16, .task = "chat"});
  auto add = [&](const std::string& model, const std::string& outcome, metrics::BucketId b, int n) {
    metrics::LabelValues l = {"auto", model, outcome};
    for (const std::string& v : registry->buckets().LabelValues(b)) l.push_back(v);
    routed.With(l).Add(n);
  };
  add("small", "served", qa, 6);      // qa: 6 small, 2 escalated to large, 2 fell back to large
  add("large", "escalated", qa, 2);
  add("large", "fallback", qa, 2);
  add("large", "served", chat, 5);    // chat: all large
  small.StepDone();
  large.StepDone();
  const nlohmann::json j = nlohmann::json::parse(ToJson(BuildSloReport(*registry, nullptr, nullptr, 1)).dump());
  ASSERT_EQ(j["routes"].size(), 1u);
  const nlohmann::json& r = j["routes"][0];
  EXPECT_EQ(r["route"], "auto");
  EXPECT_EQ(r["requests"], 15);
  EXPECT_DOUBLE_EQ(r["escalation_rate"].get<double>(), 2.0 / 15);
  EXPECT_DOUBLE_EQ(r["fallback_rate"].get<double>(), 2.0 / 15);
  EXPECT_DOUBLE_EQ(r["model_share"]["small"].get<double>(), 6.0 / 15);
  ASSERT_EQ(r["buckets"].size(), 2u);
  const std::string qa_key = registry->buckets().Key(qa);
  bool saw_qa = false;
  for (const nlohmann::json& b : r["buckets"]) {
    if (b["key"] != qa_key) {
      EXPECT_EQ(b["requests"], 5);
      EXPECT_DOUBLE_EQ(b["escalation_rate"].get<double>(), 0.0);
      continue;
    }
    saw_qa = true;
    EXPECT_EQ(b["requests"], 10);
    EXPECT_DOUBLE_EQ(b["escalation_rate"].get<double>(), 0.2);
    EXPECT_DOUBLE_EQ(b["model_share"]["large"].get<double>(), 0.4);
  }
  EXPECT_TRUE(saw_qa);
  for (const nlohmann::json& m : j["models"]) {
    if (m["model"] == "large") {
      EXPECT_EQ(m["route"]["requests"], 9);
      EXPECT_EQ(m["route"]["escalated"], 2);
      EXPECT_EQ(m["buckets"].size(), 2u);  // its routed buckets appear without engine series
    } else {
      EXPECT_EQ(m["route"]["requests"], 6);
      ASSERT_EQ(m["buckets"].size(), 1u);
      EXPECT_EQ(m["buckets"][0]["routed"]["served"], 6);
    }
  }
  const std::string table = RenderSloTable(j);
  EXPECT_NE(table.find("route auto (since start): 15 requests, escalated 13.3%"), std::string::npos) << table;
  EXPECT_NE(table.find("escalated 20.0%"), std::string::npos) << table;
}

TEST(SloReportTest, TheTableSurvivesAnEmptyOrOddDocument) {
  EXPECT_NE(RenderSloTable(nlohmann::json::object()).find("none"), std::string::npos);
  EXPECT_FALSE(RenderSloTable(nlohmann::json{{"models", {{{"buckets", {{{"x", 1}}}}}}}}).empty());
}

}  // namespace
}  // namespace tarmac::control
