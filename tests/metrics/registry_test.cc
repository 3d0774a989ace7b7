// The registry: families and labels, histogram buckets, callback series, summaries of window
// quantiles, exposition text, and concurrent updates.
#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tarmac::metrics {
namespace {

bool Has(const std::string& text, const std::string& line) { return text.find(line) != std::string::npos; }

TEST(Registry, CountersAndGaugesByLabels) {
  Registry r;
  auto& c = r.Counters("t:requests_total", "Requests.", {"model_name", "code"});
  c.With({"a", "200"}).Add();
  c.With({"a", "200"}).Add(2);
  c.With({"b", "500"}).Add();
  r.Gauges("t:running", "Running.", {"model_name"}).With({"a"}).Set(3);
  const std::string t = r.Render(0);
  EXPECT_TRUE(Has(t, "# HELP t:requests_total Requests.\n# TYPE t:requests_total counter\n")) << t;
  EXPECT_TRUE(Has(t, "t:requests_total{model_name=\"a\",code=\"200\"} 3\n")) << t;
  EXPECT_TRUE(Has(t, "t:requests_total{model_name=\"b\",code=\"500\"} 1\n"));
  EXPECT_TRUE(Has(t, "# TYPE t:running gauge\nt:running{model_name=\"a\"} 3\n")) << t;
  // The same name registers the same family; series references stay valid.
  Counter& again = r.Counters("t:requests_total", "Requests.", {"model_name", "code"}).With({"a", "200"});
  EXPECT_EQ(&again, &c.With({"a", "200"}));
  EXPECT_EQ(r.Collect("t:requests_total", 0).Find({"a", "200"})->value, 3);
}

TEST(Registry, LabelValuesAreEscaped) {
  Registry r;
  r.Gauges("t:g", "G.", {"model_name"}).With({"a\"b\\c\nd"}).Set(1);
  EXPECT_TRUE(Has(r.Render(0), "t:g{model_name=\"a\\\"b\\\\c\\nd\"} 1\n")) << r.Render(0);
}

TEST(Registry, HistogramIsCumulativeWithSumAndCount) {
  Registry r;
  Histogram& h = r.Histograms("t:latency_seconds", "L.", {"m"}, {1.0, 2.0}).With({"x"});
  h.Observe(0.5);
  h.Observe(1.0);  // "le" is inclusive
  h.ObserveAll(std::vector<double>{1.5, 5.0});
  const std::string t = r.Render(0);
  EXPECT_TRUE(Has(t, "t:latency_seconds_bucket{m=\"x\",le=\"1\"} 2\n")) << t;
  EXPECT_TRUE(Has(t, "t:latency_seconds_bucket{m=\"x\",le=\"2\"} 3\n"));
  EXPECT_TRUE(Has(t, "t:latency_seconds_bucket{m=\"x\",le=\"+Inf\"} 4\n"));
  EXPECT_TRUE(Has(t, "t:latency_seconds_sum{m=\"x\"} 8\n"));
  EXPECT_TRUE(Has(t, "t:latency_seconds_count{m=\"x\"} 4\n"));
}

TEST(Registry, CallbackSeriesAreComputedWhenReadAndRemovedWithTheirHandle) {
  Registry r;
  std::atomic<int> calls{0};
  double v = 1;
  {
    CallbackHandle h = r.Gauges("t:kv", "KV.", {"model_name"}).Callback({"m"}, [&] {
      ++calls;
      return v;
    });
    EXPECT_EQ(calls.load(), 0);  // nothing computed until read
    v = 0.25;
    EXPECT_TRUE(Has(r.Render(0), "t:kv{model_name=\"m\"} 0.25\n"));
    EXPECT_EQ(calls.load(), 1);
  }
  EXPECT_FALSE(Has(r.Render(0), "t:kv{"));
  EXPECT_EQ(calls.load(), 1);
}

TEST(Registry, WindowsRenderAsSummaries) {
  Registry r;
  WindowQuantiles& w = r.Windows("t:ttft_window_seconds", "TTFT.", {"m"}, 60.0, {0.5, 0.99}).With({"x"});
  for (int i = 1; i <= 100; ++i) w.Observe(i, 10.0);
  const std::string t = r.Render(10.0);
  EXPECT_TRUE(Has(t, "# TYPE t:ttft_window_seconds summary\n")) << t;
  EXPECT_TRUE(Has(t, "t:ttft_window_seconds{m=\"x\",quantile=\"0.5\"} 50\n")) << t;
  EXPECT_TRUE(Has(t, "t:ttft_window_seconds{m=\"x\",quantile=\"0.99\"} 99\n"));
  EXPECT_TRUE(Has(t, "t:ttft_window_seconds_count{m=\"x\"} 100\n"));
  EXPECT_TRUE(Has(t, "t:ttft_window_seconds_sum{m=\"x\"} 5050\n"));
  EXPECT_TRUE(Has(r.Render(1000.0), "t:ttft_window_seconds{m=\"x\",quantile=\"0.5\"} NaN\n"));
}

TEST(Registry, FamiliesRenderInRegistrationOrderWithOneTypeLineEach) {
  Registry r;
  r.Counters("t:b", "B.", {}).With({}).Add();
  r.Gauges("t:a", "A.", {"m"}).With({"1"}).Set(1);
  r.Gauges("t:a", "A.", {"m"}).With({"2"}).Set(2);
  const std::string t = r.Render(0);
  EXPECT_LT(t.find("t:b"), t.find("t:a"));
  EXPECT_EQ(t.find("# TYPE t:a"), t.rfind("# TYPE t:a"));
  EXPECT_TRUE(Has(t, "t:b 1\n")) << t;  // no labels: no braces
}

TEST(Registry, ConcurrentUpdatesAndReadsLoseNothing) {
  Registry r;
  auto& c = r.Counters("t:c", "C.", {"t"});
  auto& h = r.Histograms("t:h", "H.", {"t"}, {0.5});
  std::vector<std::thread> ts;
  for (int k = 0; k < 4; ++k) {
    ts.emplace_back([&, k] {
      Counter& mine = c.With({std::to_string(k % 2)});
      Histogram& hist = h.With({"x"});
      for (int i = 0; i < 20000; ++i) {
        mine.Add();
        hist.Observe(i % 2 ? 1.0 : 0.0);
      }
    });
  }
  std::thread reader([&] {
    for (int i = 0; i < 50; ++i) (void)r.Render(0);
  });
  for (auto& t : ts) t.join();
  reader.join();
  const FamilySnapshot cs = r.Collect("t:c", 0);
  EXPECT_EQ(cs.Find({"0"})->value + cs.Find({"1"})->value, 80000);
  const Histogram::Snapshot hs = r.Collect("t:h", 0).Find({"x"})->histogram;
  EXPECT_EQ(hs.count, 80000u);
  EXPECT_EQ(hs.cumulative[0], 40000u);
}

}  // namespace
}  // namespace tarmac::metrics
