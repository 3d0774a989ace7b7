#include "base/work_queue.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/check.h"

namespace tarmac {

WorkQueue::WorkQueue(int threads, size_t capacity, OnStop on_stop, int nice) : capacity_(capacity), on_stop_(on_stop) {
  TARMAC_CHECK(threads >= 1 && capacity >= 1 && nice >= 0 && nice <= 19);
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, nice] { Work(nice); });
}

WorkQueue::~WorkQueue() { Stop(); }

bool WorkQueue::TrySubmit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ || jobs_.size() >= capacity_) return false;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void WorkQueue::Stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    if (on_stop_ == OnStop::kDropQueued) dropped.swap(jobs_);
  }
  cv_.notify_all();
  dropped.clear();  // outside the lock: a job's captures may take time to destroy
  std::lock_guard<std::mutex> j(join_mu_);
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

size_t WorkQueue::waiting() const {
  std::lock_guard<std::mutex> l(mu_);
  return jobs_.size();
}

void WorkQueue::Work(int nice) {
  // Best effort: a thread left at nice 0 only competes harder.
  if (nice != 0) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice);
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, nothing left (or dropped)
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace tarmac
