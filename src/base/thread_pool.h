// ThreadPool: a fixed set of persistent worker threads for data-parallel kernels.
//
// Owns num_threads-1 worker threads, created once in the constructor and joined in the
// destructor; the thread that calls ParallelFor is worker 0 and does its share, so
// ThreadPool(1) runs everything inline with no synchronisation at all. Between jobs workers
// spin briefly (a forward pass issues jobs back to back, and waking a sleeping thread costs
// tens of microseconds) and then sleep on an atomic wait.
//
// Thread-safety: ParallelFor must be called from one thread at a time (the owner, e.g. an
// engine's step thread); it is not reentrant (a task must not call ParallelFor on the same
// pool). Everything else is const.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace tarmac {

class ThreadPool {
 public:
  // num_threads >= 1: total threads that run tasks, including the caller.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Splits [0, n) into chunks of `grain` items (the last may be shorter) and calls
  // fn(begin, end, thread_index) for each chunk, thread_index in [0, num_threads()).
  // Chunks are handed out dynamically, so uneven chunks balance. Blocks until all are done.
  // Preconditions: n >= 0, grain >= 1.
  template <typename Fn>
  void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    Run(n, grain, const_cast<void*>(static_cast<const void*>(&fn)),
        [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<F*>(ctx))(b, e, t); });
  }

  // Default pool size: hardware threads (at least 1).
  static int DefaultThreads();

 private:
  using TaskFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread);
  void Run(int64_t n, int64_t grain, void* ctx, TaskFn fn);
  void WorkerLoop(int thread_index);
  void DoChunks(int thread_index);

  const int num_threads_;
  std::vector<std::thread> workers_;

  // Current job; written by the caller before bumping generation_, read by workers after.
  void* job_ctx_ = nullptr;
  TaskFn job_fn_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;

  alignas(64) std::atomic<uint64_t> generation_{0};  // bumped once per job
  alignas(64) std::atomic<int64_t> next_chunk_{0};   // next chunk index to hand out
  alignas(64) std::atomic<int> pending_workers_{0};  // workers not yet done with this job
  alignas(64) std::atomic<int> sleepers_{0};         // workers blocked in generation_.wait
  std::atomic<bool> stop_{false};
};

}  // namespace tarmac
