#include "base/cpu_affinity.h"

#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/thread_pool.h"

namespace tarmac {
namespace {

using Cpus = std::vector<int>;

TEST(CpuAffinity, ChecksTheList) {
  EXPECT_FALSE(CheckCpus({}).ok());
  EXPECT_EQ(CheckCpus({-1}).field(), "cpus");
  EXPECT_FALSE(CheckCpus({4000}).ok());
  ASSERT_TRUE(CheckCpus(AllowedCpus()).ok());
}

TEST(CpuAffinity, AllowedCpusIsTheAffinityMask) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const Cpus allowed = AllowedCpus();
  ASSERT_EQ(static_cast<int>(allowed.size()), CPU_COUNT(&set));
  for (size_t i = 0; i < allowed.size(); ++i) {
    EXPECT_TRUE(CPU_ISSET(allowed[i], &set));
    if (i > 0) {
      EXPECT_LT(allowed[i - 1], allowed[i]);
    }
  }
  EXPECT_EQ(ThreadPool::DefaultThreads(), static_cast<int>(allowed.size()));
}

TEST(CpuAffinity, ThreadCpusGivesEachThreadItsOwnWhenThereAreEnough) {
  EXPECT_EQ(ThreadCpus({4, 6}, 2, 0), (Cpus{4}));
  EXPECT_EQ(ThreadCpus({4, 6}, 2, 1), (Cpus{6}));
  EXPECT_EQ(ThreadCpus({4, 6, 7}, 2, 1), (Cpus{6}));
  EXPECT_EQ(ThreadCpus({4, 6}, 3, 0), (Cpus{4, 6}));  // fewer CPUs than threads: shared
  EXPECT_EQ(ThreadCpus({4, 6}, 3, 2), (Cpus{4, 6}));
  EXPECT_EQ(ThreadCpus({3}, 1, 0), (Cpus{3}));
}

TEST(CpuAffinity, DefaultPlacementPinsOnlyWhenTheThreadsFillTheMachine) {
  using Placement = std::vector<Cpus>;
  EXPECT_EQ(DefaultPlacement({2}, {0, 1}), (Placement{{0, 1}}));
  EXPECT_EQ(DefaultPlacement({1, 3}, {0, 2, 5, 7}), (Placement{{0}, {2, 5, 7}}));
  EXPECT_EQ(DefaultPlacement({1}, {0, 1}), (Placement{{}}));      // part of the machine: the OS places it
  EXPECT_EQ(DefaultPlacement({2, 2}, {0, 1}), (Placement{{}, {}}));  // oversubscribed
  EXPECT_EQ(DefaultPlacement({}, {0, 1}), (Placement{}));
}

TEST(CpuAffinity, PinsTheCaller) {
  std::thread t([] {
    ASSERT_TRUE(PinCurrentThread({0}).ok());
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    EXPECT_TRUE(CPU_ISSET(0, &set));
    EXPECT_EQ(CPU_COUNT(&set), 1);
  });
  t.join();
}

// Every chunk runs on the CPU of the thread that ran it (a worker's chunk the caller took
// over runs on the caller's).
TEST(CpuAffinity, PinWithCallerPutsEachPoolThreadOnItsOwnCpu) {
  const Cpus allowed = AllowedCpus();
  const int n = static_cast<int>(std::min<size_t>(allowed.size(), 4));
  if (n < 2) GTEST_SKIP() << "needs 2 CPUs";
  std::thread owner([&] {
    ThreadPool pool(n);
    ASSERT_TRUE(pool.PinWithCaller(allowed).ok());
    std::atomic<int> wrong{0}, ran_by_worker{0};
    for (int rep = 0; rep < 200; ++rep) {
      pool.ParallelFor(n * 4, 1, [&](int64_t, int64_t, int thread) {
        if (sched_getcpu() != allowed[thread]) wrong.fetch_add(1);
        if (thread != 0) ran_by_worker.fetch_add(1);
        // Busy work the optimiser keeps: a store to a volatile each turn (C++20 deprecates
        // ++ on one).
        [[maybe_unused]] volatile int sink = 0;
        for (int spin = 0; spin < 2000; ++spin) sink = spin;
      });
    }
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_GT(ran_by_worker.load(), 0);
  });
  owner.join();
}

TEST(CpuAffinity, PinWorkersSharesTooFewCpus) {
  ThreadPool pool(3);
  ASSERT_TRUE(pool.PinWorkers({0}).ok());
  std::atomic<int> off_cpu0{0};
  pool.ParallelFor(3, 1, [&](int64_t, int64_t, int thread) {
    if (thread != 0 && sched_getcpu() != 0) off_cpu0.fetch_add(1);
  });
  EXPECT_EQ(off_cpu0.load(), 0);
}

}  // namespace
}  // namespace tarmac
