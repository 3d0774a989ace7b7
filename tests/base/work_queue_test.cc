#include "base/work_queue.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include <gtest/gtest.h>

namespace tarmac {
namespace {

using namespace std::chrono_literals;

// A latch the test opens to let blocked jobs finish.
struct Gate {
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
};

TEST(WorkQueueTest, RunsEveryJobOnItsThreads) {
  WorkQueue q(2, 100, WorkQueue::OnStop::kFinishQueued);
  EXPECT_EQ(q.threads(), 2);
  std::atomic<int> ran{0};
  std::mutex mu;
  std::set<std::thread::id> ids;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(q.TrySubmit([&] {
      {
        std::lock_guard<std::mutex> l(mu);
        ids.insert(std::this_thread::get_id());
      }
      ran++;
    }));
  }
  q.Stop();
  EXPECT_EQ(ran.load(), 50);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 0u);  // never inline
  EXPECT_LE(ids.size(), 2u);
}

TEST(WorkQueueTest, RefusesBeyondCapacityWhileWorkersAreBusy) {
  WorkQueue q(1, 2, WorkQueue::OnStop::kFinishQueued);
  Gate gate;
  std::promise<void> started;
  ASSERT_TRUE(q.TrySubmit([&] {
    started.set_value();
    gate.opened.wait();
  }));
  started.get_future().wait();  // the worker holds job 1; the queue is empty
  std::atomic<int> ran{0};
  EXPECT_TRUE(q.TrySubmit([&] { ran++; }));
  EXPECT_TRUE(q.TrySubmit([&] { ran++; }));
  EXPECT_EQ(q.waiting(), 2u);
  auto refused = std::make_shared<int>(0);
  EXPECT_FALSE(q.TrySubmit([&, refused] { ran += 100; }));
  EXPECT_EQ(refused.use_count(), 1);  // the refused job was destroyed, not kept
  gate.open.set_value();
  q.Stop();
  EXPECT_EQ(ran.load(), 2);
}

TEST(WorkQueueTest, StopFinishesOrDropsTheQueuedJobs) {
  for (WorkQueue::OnStop mode : {WorkQueue::OnStop::kFinishQueued, WorkQueue::OnStop::kDropQueued}) {
    WorkQueue q(1, 10, mode);
    Gate gate;
    std::promise<void> started;
    std::atomic<int> ran{0};
    ASSERT_TRUE(q.TrySubmit([&] {
      started.set_value();
      gate.opened.wait();
      ran++;
    }));
    started.get_future().wait();
    auto held = std::make_shared<int>(0);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.TrySubmit([&ran, held] { ran++; }));
    std::thread stopper([&] { q.Stop(); });
    std::this_thread::sleep_for(20ms);
    gate.open.set_value();  // Stop waits for the running job
    stopper.join();
    const bool finish = mode == WorkQueue::OnStop::kFinishQueued;
    EXPECT_EQ(ran.load(), finish ? 4 : 1);
    EXPECT_EQ(held.use_count(), 1);  // run or dropped, every job is gone
    EXPECT_FALSE(q.TrySubmit([] {}));  // stopped: refused
    q.Stop();                          // idempotent
  }
}

TEST(WorkQueueTest, ConcurrentSubmittersNeverLoseAJob) {
  WorkQueue q(2, 1 << 20, WorkQueue::OnStop::kFinishQueued);
  std::atomic<int> ran{0}, accepted{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; ++i)
        if (q.TrySubmit([&] { ran++; })) accepted++;
    });
  for (auto& t : ts) t.join();
  q.Stop();
  EXPECT_EQ(accepted.load(), 4000);
  EXPECT_EQ(ran.load(), 4000);
}

// Its threads run at the nice value asked for (the server's prepare threads: 10); the thread
// that made the queue keeps its own.
TEST(WorkQueueTest, ThreadsRunAtTheirNiceValue) {
  const int mine = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  WorkQueue q(2, 4, WorkQueue::OnStop::kFinishQueued, 10);
  std::promise<int> seen;
  ASSERT_TRUE(q.TrySubmit([&] { seen.set_value(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)))); }));
  EXPECT_EQ(seen.get_future().get(), std::max(mine, 10));
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))), mine);
}

}  // namespace
}  // namespace tarmac
