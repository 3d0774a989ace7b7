// ExpertLoadWindow: the balance statistics of known counts, and the window over cumulative
// counts observed at chosen times (no clock: the caller's times).
#include "engine/expert_load.h"

#include <gtest/gtest.h>

namespace tarmac::engine {
namespace {

TEST(ExpertLoadTest, StatisticsOfKnownCounts) {
  // Layer 0 even over 10 experts; layer 1 all on expert 3.
  std::vector<int64_t> w(20, 0);
  for (int e = 0; e < 10; ++e) w[e] = 5;
  w[10 + 3] = 50;
  const ExpertLoad l = ExpertLoadWindow::Of(w, 2, 10);
  EXPECT_DOUBLE_EQ(l.max_over_mean, (1.0 + 10.0) / 2);
  EXPECT_DOUBLE_EQ(l.hot_share, (0.1 + 1.0) / 2);  // hottest 10% = 1 expert
  EXPECT_EQ(l.routed, 100);
  // Layers without tokens are left out; no tokens at all gives zeros.
  std::vector<int64_t> one(20, 0);
  one[5] = 4;
  EXPECT_DOUBLE_EQ(ExpertLoadWindow::Of(one, 2, 10).max_over_mean, 10.0);
  EXPECT_EQ(ExpertLoadWindow::Of(std::vector<int64_t>(20, 0), 2, 10).routed, 0);
  // 128 experts: the hottest 13.
  std::vector<int64_t> big(128, 1);
  EXPECT_NEAR(ExpertLoadWindow::Of(big, 1, 128).hot_share, 13.0 / 128, 1e-12);
}

TEST(ExpertLoadTest, WindowOverCumulativeCounts) {
  ExpertLoadWindow win(1, 2, /*window_s=*/60, /*every_s=*/5);
  // At load nothing; then expert 0 takes 100 tokens by t = 10.
  EXPECT_EQ(win.Observe(0, {0, 0}).routed, 0);
  ExpertLoad l = win.Observe(10, {100, 0});
  EXPECT_EQ(l.routed, 100);
  EXPECT_DOUBLE_EQ(l.max_over_mean, 2.0);
  // From t = 10 on, only expert 1: by t = 100 the window (t >= 40) holds expert 1's tokens
  // plus whatever came between the window's start snapshot and now.
  for (double t = 15; t <= 100; t += 5) win.Observe(t, {100, static_cast<int64_t>(10 * (t - 10))});
  l = win.Observe(100, {100, 900});
  EXPECT_EQ(l.routed, 900 - 10 * (40 - 10));  // since the snapshot at t = 40
  EXPECT_DOUBLE_EQ(l.max_over_mean, 2.0);
  EXPECT_DOUBLE_EQ(l.hot_share, 1.0);
}

}  // namespace
}  // namespace tarmac::engine
