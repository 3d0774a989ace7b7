#include "base/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <random>
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
      // Wait a little for the other thread inside the chunk: while the caller is busy here it
      // cannot take the worker's chunks, so a worker the OS schedules late (a loaded host, a
      // sanitizer build) still gets one. A pool that never uses its worker fails all the same.
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
      while (seen_mask.load() != 3 && std::chrono::steady_clock::now() < until) {
      }
    });
  }
  EXPECT_EQ(seen_mask.load(), 3);
}

// Random sizes on 3 threads, back to back: every index exactly once, whether chunks go out
// in the first round (chunk t to thread t) or from the shared counter.
TEST(ThreadPoolTest, RandomJobsCoverEveryIndexOnce) {
  ThreadPool pool(3);
  std::mt19937 rng(7);
  for (int job = 0; job < 3000; ++job) {
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 200)(rng);
    const int64_t grain = std::uniform_int_distribution<int64_t>(1, 80)(rng);
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, grain, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << job << " " << n << " " << grain;
  }
}

// Guided chunks partition [0, n) in increasing order: the first round (one chunk per thread)
// covers about 2/3 of n, later chunks never grow, none is under min_grain but the last, and
// the count stays within kMaxGuidedChunks; ParallelForGuided runs every index exactly once.
TEST(ThreadPoolTest, GuidedChunksShrinkAndCoverEveryIndexOnce) {
  std::mt19937 rng(12);
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    int64_t bounds[ThreadPool::kMaxGuidedChunks + 1];
    EXPECT_EQ(pool.GuidedBounds(0, 4, bounds), 0);
    for (int64_t n : std::initializer_list<int64_t>{1, 2, 5, 17, 192, 1000, 4096, 1 << 20,
                                                     int64_t{1} << 40}) {
      for (int64_t min_grain : {1, 4, 100}) {
        const int chunks = pool.GuidedBounds(n, min_grain, bounds);
        ASSERT_GE(chunks, 1);
        ASSERT_LE(chunks, ThreadPool::kMaxGuidedChunks);
        ASSERT_EQ(bounds[0], 0);
        ASSERT_EQ(bounds[chunks], n);
        for (int c = 0; c < chunks; ++c) {
          const int64_t size = bounds[c + 1] - bounds[c];
          ASSERT_GT(size, 0) << n << " " << c;
          // The last chunk takes the rest: under min_grain, or more once the count is capped.
          const bool last_two = c + 2 >= chunks;
          if (c + 1 < chunks) {
            ASSERT_GE(size, std::min(min_grain, n)) << n << " " << c;
          }
          if (c >= threads && !last_two) {
            ASSERT_LE(bounds[c + 2] - bounds[c + 1], size);
          }
        }
        if (n >= 30 * threads * min_grain) {  // rounding aside
          const int64_t first_round = bounds[std::min(threads, chunks)];
          EXPECT_NEAR(static_cast<double>(first_round) / n, 2.0 / 3, 0.1) << n;
        }
      }
    }
    for (int job = 0; job < 500; ++job) {
      const int64_t n = std::uniform_int_distribution<int64_t>(0, 3000)(rng);
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelForGuided(n, std::uniform_int_distribution<int64_t>(1, 50)(rng),
                             [&](int64_t b, int64_t e, int) {
                               for (int64_t i = b; i < e; ++i) hits[i]++;
                             });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << job << " " << n;
    }
  }
}

// All threads on one CPU: a worker only runs when the caller gives up the core, so the
// caller must take over the workers' first-round chunks rather than wait for them.
TEST(ThreadPoolTest, CallerRunsChunksOfWorkersThatCannotRun) {
  cpu_set_t old_set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(old_set), &old_set), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &old_set)) ++cpu;
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // the workers inherit it
  {
    ThreadPool pool(3);
    std::atomic<int> taken_over{0};
    for (int job = 0; job < 500; ++job) {
      std::vector<std::atomic<int>> hits(3);
      pool.ParallelFor(3, 1, [&](int64_t b, int64_t, int t) {
        hits[b]++;
        if (b != t) taken_over++;
      });
      for (int i = 0; i < 3; ++i) ASSERT_EQ(hits[i].load(), 1) << job;
    }
    EXPECT_GT(taken_over.load(), 0);
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(old_set), &old_set), 0);
}

}  // namespace
}  // namespace tarmac
