// ThreadPool: a fixed set of persistent worker threads for data-parallel kernels.
//
// Owns num_threads-1 worker threads, created once in the constructor and joined in the
// destructor; the thread that calls ParallelFor is worker 0 and does its share, so
// ThreadPool(1) runs everything inline with no synchronisation at all. Between jobs workers
// spin briefly (a forward pass issues jobs back to back, and waking a sleeping thread costs
// tens of microseconds) and then sleep on an atomic wait.
//
// A job costs as few cache-line hand-offs between cores as it can (each is a cross-core cache
// miss, and a decode step runs ~60 jobs; bench/NOTES.md): a worker reads the job from one
// line, runs chunk t (its own thread index) without claiming it from a shared counter, takes
// further chunks from the counter only when there are more chunks than threads, and reports
// on its own line. The caller takes over a worker's first chunk when the worker has not
// started it within kStealAfterNanos (a descheduled or sleeping worker on a busy machine must
// not hold the job up).
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

#include "base/status.h"

namespace tarmac {

class ThreadPool {
 public:
  // num_threads >= 1: total threads that run tasks, including the caller.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  // Restricts worker t to ThreadCpus(cpus, num_threads(), t) (base/cpu_affinity.h): each its
  // own CPU when there are enough. The caller pins itself (it is thread 0: cpus[0]).
  // Preconditions: CheckCpus(cpus).ok().
  Status PinWorkers(const std::vector<int>& cpus);
  // PinWorkers, and the calling thread to thread 0's CPUs: for an owner that calls ParallelFor
  // from the thread it constructs the pool on.
  Status PinWithCaller(const std::vector<int>& cpus);

  // Splits [0, n) into chunks of `grain` items (the last may be shorter) and calls
  // fn(begin, end, thread_index) for each chunk, thread_index in [0, num_threads()) (the
  // thread that runs it). Chunk t < num_threads() goes to thread t first; the rest are handed
  // out dynamically, so uneven chunks balance. Blocks until all are done.
  // Preconditions: n >= 0, grain >= 1.
  template <typename Fn>
  void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    Run(n, grain, const_cast<void*>(static_cast<const void*>(&fn)),
        [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<F*>(ctx))(b, e, t); });
  }

  // ParallelFor over [0, n) in shrinking chunks: first one chunk per thread covering 2/3 of n
  // together (thread t gets chunk t, as in ParallelFor), then chunks of 1/(2·threads) of what
  // is left, down to min_grain items, so a thread that runs slower (a busier CPU, a
  // late start) is helped by small chunks at the end rather than left holding a large one.
  // For streaming kernels, where each chunk restarts a thread's read stream.
  // fn(begin, end, thread_index) as in ParallelFor. Preconditions: n >= 0, min_grain >= 1.
  template <typename Fn>
  void ParallelForGuided(int64_t n, int64_t min_grain, Fn&& fn) {
    int64_t bounds[kMaxGuidedChunks + 1];
    const int chunks = GuidedBounds(n, min_grain, bounds);
    ParallelFor(chunks, 1, [&](int64_t c0, int64_t c1, int t) {
      for (int64_t c = c0; c < c1; ++c) fn(bounds[c], bounds[c + 1], t);
    });
  }
  // ParallelForGuided's chunks: bounds[0] = 0 < bounds[1] < ... < bounds[chunks] = n; returns
  // chunks (0 when n == 0), at most kMaxGuidedChunks.
  static constexpr int kMaxGuidedChunks = 48;
  int GuidedBounds(int64_t n, int64_t min_grain, int64_t* bounds) const;

  // Default pool size: the CPUs this process may run on (its affinity mask, at least 1).
  static int DefaultThreads();

 private:
  using TaskFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread);
  struct JobView {
    TaskFn fn;
    void* ctx;
    int64_t n, grain, chunks;
  };
  void Run(int64_t n, int64_t grain, void* ctx, TaskFn fn);
  void WorkerLoop(int thread_index);
  // Claims chunk `chunk` (1 <= chunk < num_threads_) of job `gen` for whoever runs it; false
  // when someone already has.
  bool ClaimFirst(int chunk, uint64_t gen);
  void RunChunk(const JobView& job, int64_t chunk, int thread_index) const;
  // Chunks from the shared counter (those beyond the first round); returns how many ran.
  int64_t RunDynamic(const JobView& job, int thread_index);

  const int num_threads_;
  std::vector<std::thread> workers_;

  // The current job, on one line: written by the caller before it bumps generation (release),
  // read by workers after. Atomics because a worker that was descheduled may read them while
  // the next job is written; it then fails its claim (claims carry the generation) and
  // runs nothing.
  struct alignas(64) Job {
    std::atomic<uint64_t> generation{0};  // bumped once per job
    std::atomic<TaskFn> fn{nullptr};
    std::atomic<void*> ctx{nullptr};
    std::atomic<int64_t> n{0};
    std::atomic<int64_t> grain{1};
    std::atomic<int64_t> chunks{0};
  };
  // Per thread, two lines: claimed, the last generation whose first-round chunk (index =
  // thread index) someone claimed, which the worker writes and the caller reads only when it
  // steals; and the line the caller polls: the worker has finished with job done_gen, having
  // run done_chunks chunks (done_chunks written first).
  struct alignas(64) Slot {
    std::atomic<uint64_t> claimed{0};
    alignas(64) std::atomic<uint64_t> done_gen{0};
    std::atomic<int64_t> done_chunks{0};
  };

  Job job_;
  alignas(64) std::atomic<int64_t> next_chunk_{0};  // next dynamic chunk (>= num_threads_)
  std::vector<Slot> slots_;
  alignas(64) std::atomic<int> sleepers_{0};  // workers blocked in generation.wait
  std::atomic<bool> stop_{false};
};

}  // namespace tarmac
