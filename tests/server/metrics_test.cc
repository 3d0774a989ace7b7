// Prometheus exposition: histogram lines, buckets by request class, engine gauges.
#include "server/metrics.h"

#include <gtest/gtest.h>

namespace tarmac::server {
namespace {

TEST(Metrics, BucketsByRequestClass) {
  EXPECT_EQ(MakeBucket("m", 10, 16, 0).prompt_band, "0-127");
  EXPECT_EQ(MakeBucket("m", 600, 16, 0).prompt_band, "512-2047");
  EXPECT_EQ(MakeBucket("m", 10, 300, 0).output_band, "256-1023");
  EXPECT_EQ(MakeBucket("m", 10, 16, -1).priority_class, "high");
  EXPECT_EQ(MakeBucket("m", 10, 16, 3).priority_class, "low");
}

TEST(Metrics, HistogramIsCumulative) {
  Histogram h({1.0, 2.0});
  h.Observe(0.5);
  h.Observe(1.5);
  h.Observe(5.0);
  std::string out;
  h.Render("x", "a=\"b\"", &out);
  EXPECT_NE(out.find("x_bucket{a=\"b\",le=\"1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{a=\"b\",le=\"2\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("x_bucket{a=\"b\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_count{a=\"b\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_sum{a=\"b\"} 7\n"), std::string::npos);
}

TEST(Metrics, RenderNamesAndLabels) {
  ServerMetrics m;
  engine::RequestMetrics rm;
  rm.prompt_tokens = 5;
  rm.output_tokens = 3;
  rm.ttft_s = 0.01;
  rm.e2e_s = 0.03;
  rm.itl_s = {0.01, 0.01};
  m.ObserveRequest(MakeBucket("wp", 5, 16, 0), rm, engine::FinishReason::kLength);
  m.CountResponse("/v1/completions", 200);
  ModelSnapshot s;
  s.model = "wp";
  s.stats.num_running = 2;
  s.stats.kv.total_blocks = 10;
  s.stats.kv.request_blocks = 5;
  std::string t = m.Render({s}, 1, 0, 3);
  EXPECT_NE(t.find("tarmac:num_requests_running{model_name=\"wp\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("tarmac:kv_cache_usage_perc{model_name=\"wp\"} 0.5\n"), std::string::npos);
  EXPECT_NE(t.find("tarmac:time_to_first_token_seconds_count{model_name=\"wp\",prompt_band=\"0-127\",output_band=\"1-63\","
                   "priority_class=\"normal\"} 1\n"),
            std::string::npos);
  EXPECT_NE(t.find("tarmac:inter_token_latency_seconds_count{"), std::string::npos);
  EXPECT_NE(t.find("finished_reason=\"length\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("tarmac:http_requests_total{route=\"/v1/completions\",code=\"200\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace tarmac::server
