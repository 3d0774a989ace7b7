// Sliding-window quantiles against a sorted reference of exactly the values in the window.
#include "metrics/window_quantiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace tarmac::metrics {
namespace {

// Nearest-rank quantile of `v` at q = num / 100, in integers (no rounding questions).
double Reference(std::vector<double> v, int num) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  size_t rank = (n * static_cast<size_t>(num) + 99) / 100;  // ceil(n * num / 100)
  return v[rank == 0 ? 0 : rank - 1];
}

TEST(WindowQuantiles, EmptyWindowIsNan) {
  WindowQuantiles w(10.0);
  EXPECT_TRUE(std::isnan(w.Quantile(0.5, 0.0)));
  w.Observe(1.0, 0.0);
  EXPECT_EQ(w.Quantile(0.5, 0.0), 1.0);
  EXPECT_TRUE(std::isnan(w.Quantile(0.5, 100.0)));  // long gone
}

TEST(WindowQuantiles, MatchesSortedReferenceAsTheWindowSlides) {
  const double window = 10.0;
  const int slices = 10;  // slices of 1 s
  WindowQuantiles w(window, slices);
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> value(0.0, 1.0);
  std::vector<std::pair<double, double>> seen;  // (time, value)
  double t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += std::exponential_distribution<double>(50.0)(rng);  // ~50 values a second
    const double x = value(rng);
    w.Observe(x, t);
    seen.push_back({t, x});
    if (i % 97 != 0) continue;
    // The window at t: values whose 1-s slice is one of the last 10 (the current one included).
    std::vector<double> in;
    const int64_t now_slice = static_cast<int64_t>(std::floor(t));
    for (const auto& [ts, v] : seen)
      if (static_cast<int64_t>(std::floor(ts)) > now_slice - slices) in.push_back(v);
    ASSERT_FALSE(in.empty());
    const double qs[] = {0.0, 0.5, 0.95, 0.99, 1.0};
    const WindowQuantiles::Summary s = w.Read(qs, t);
    EXPECT_EQ(s.count, in.size());
    EXPECT_EQ(s.quantiles[0], *std::min_element(in.begin(), in.end()));
    EXPECT_EQ(s.quantiles[1], Reference(in, 50)) << "at t=" << t;
    EXPECT_EQ(s.quantiles[2], Reference(in, 95));
    EXPECT_EQ(s.quantiles[3], Reference(in, 99));
    EXPECT_EQ(s.quantiles[4], *std::max_element(in.begin(), in.end()));
    double sum = 0;
    for (double v : in) sum += v;
    EXPECT_NEAR(s.sum, sum, 1e-9 * std::max(1.0, sum));
  }
}

TEST(WindowQuantiles, ReadLaterDropsExpiredSlices) {
  WindowQuantiles w(4.0, 4);
  for (int i = 0; i < 4; ++i) w.Observe(static_cast<double>(i), static_cast<double>(i));  // one per slice
  EXPECT_EQ(w.Read(std::vector<double>{0.0}, 3.5).count, 4u);
  EXPECT_EQ(w.Quantile(0.0, 4.5), 1.0);   // slice 0 expired
  EXPECT_EQ(w.Quantile(0.0, 6.2), 3.0);   // slices 0..2 expired
  EXPECT_EQ(w.Read(std::vector<double>{0.0}, 7.0).count, 0u);
}

TEST(WindowQuantiles, OverflowingSliceKeepsAnUnbiasedSample) {
  WindowQuantiles w(1.0, 1, 1000);
  for (int i = 0; i < 100000; ++i) w.Observe(static_cast<double>(i % 1000), 0.5);
  const WindowQuantiles::Summary s = w.Read(std::vector<double>{0.5, 0.99}, 0.5);
  EXPECT_EQ(s.count, 100000u);
  EXPECT_NEAR(s.quantiles[0], 500.0, 60.0);  // a 1000-value uniform sample of 0..999
  EXPECT_NEAR(s.quantiles[1], 990.0, 15.0);
}

}  // namespace
}  // namespace tarmac::metrics
