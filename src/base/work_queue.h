// WorkQueue: a few worker threads that run submitted jobs (std::function<void()>) in the order
// they came, with a bounded queue: what takes blocking or CPU-bound work off a thread that
// must stay responsive (the server's I/O thread hands it cache-store calls and request
// preparation). A job reports back itself (the server's post to its io_context).
//
// Owns its threads (started by the constructor, joined by Stop) and the queued jobs. Thread-
// safe: TrySubmit, waiting and Stop may be called from any thread, jobs included (a job must
// not call Stop: it would wait for itself). Stop is idempotent; the destructor calls it.
// A job must not throw (nothing above it catches: the process would terminate).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tarmac {

class WorkQueue {
 public:
  // What Stop does with jobs still waiting: run them first (a cache write that must land), or
  // destroy them unrun on Stop's thread (work nobody waits for any more).
  enum class OnStop { kFinishQueued, kDropQueued };

  // Preconditions: threads >= 1, capacity >= 1 (jobs waiting, not counting those running),
  // 0 <= nice <= 19. nice: its threads' nice value (Linux sets it per thread; raising it needs
  // no privilege), for background work that must yield the CPU to latency-critical threads.
  WorkQueue(int threads, size_t capacity, OnStop on_stop, int nice = 0);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues job. False, and the job is destroyed unrun, when `capacity` jobs are already waiting
  // or the queue has stopped.
  bool TrySubmit(std::function<void()> job);
  // Refuses new jobs, finishes or drops the waiting ones (OnStop), waits for the running ones,
  // joins the threads. Returns at once when already stopped.
  void Stop();

  size_t waiting() const;  // queued, not yet running
  int threads() const { return static_cast<int>(threads_.size()); }
  size_t capacity() const { return capacity_; }

 private:
  void Work(int nice);

  const size_t capacity_;
  const OnStop on_stop_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::mutex join_mu_;  // one Stop joins; a second waits for it
  std::vector<std::thread> threads_;
};

}  // namespace tarmac
