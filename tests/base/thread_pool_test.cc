#include "base/thread_pool.h"

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

namespace tarmac {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000}) {
      for (int64_t grain : {1, 3, 64, 5000}) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int> bad_thread{0};
        pool.ParallelFor(n, grain, [&](int64_t b, int64_t e, int t) {
          if (t < 0 || t >= threads) bad_thread++;
          EXPECT_LE(e - b, grain);
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << grain;
        EXPECT_EQ(bad_thread.load(), 0);
      }
    }
  }
}

TEST(ThreadPoolTest, ManyBackToBackJobs) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 20000; ++job) {
    pool.ParallelFor(8, 1, [&](int64_t b, int64_t e, int) { sum += e - b; });
  }
  EXPECT_EQ(sum.load(), 8 * 20000);
}

TEST(ThreadPoolTest, UsesWorkers) {
  ThreadPool pool(2);
  std::atomic<int> seen_mask{0};
  for (int i = 0; i < 200 && seen_mask.load() != 3; ++i) {
    pool.ParallelFor(64, 1, [&](int64_t, int64_t, int t) {
      seen_mask |= 1 << t;
      volatile int x = 0;
      for (int k = 0; k < 20000; ++k) x = x + k;
    });
  }
  EXPECT_EQ(seen_mask.load(), 3);
}

}  // namespace
}  // namespace tarmac
