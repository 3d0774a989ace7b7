#include "base/thread_pool.h"

#include "base/check.h"
#include "base/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TARMAC_PAUSE() _mm_pause()
#else
#define TARMAC_PAUSE() std::this_thread::yield()
#endif

namespace tarmac {
namespace {
// How long an idle worker spins before it sleeps. Long enough to bridge the gap between two
// kernels of one forward pass, short enough not to burn a core between requests.
constexpr int64_t kSpinNanos = 2'000'000;
}  // namespace

int ThreadPool::DefaultThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads) {
  TARMAC_CHECK(num_threads >= 1);
  workers_.reserve(num_threads - 1);
  for (int t = 1; t < num_threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::DoChunks(int thread_index) {
  const int64_t num_chunks = (job_n_ + job_grain_ - 1) / job_grain_;
  for (;;) {
    int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks) break;
    int64_t b = c * job_grain_;
    int64_t e = b + job_grain_ < job_n_ ? b + job_grain_ : job_n_;
    job_fn_(job_ctx_, b, e, thread_index);
  }
}

void ThreadPool::Run(int64_t n, int64_t grain, void* ctx, TaskFn fn) {
  TARMAC_CHECK(n >= 0 && grain >= 1);
  if (n == 0) return;
  if (workers_.empty() || n <= grain) {
    for (int64_t b = 0; b < n; b += grain) fn(ctx, b, b + grain < n ? b + grain : n, 0);
    return;
  }
  job_ctx_ = ctx;
  job_fn_ = fn;
  job_n_ = n;
  job_grain_ = grain;
  next_chunk_.store(0, std::memory_order_relaxed);
  pending_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes the job (release)
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  DoChunks(0);
  int spins = 0;
  while (pending_workers_.load(std::memory_order_acquire) != 0) {
    if (++spins < 256) {
      TARMAC_PAUSE();
    } else {
      std::this_thread::yield();  // a worker may have been descheduled; give it the core
    }
  }
}

void ThreadPool::WorkerLoop(int thread_index) {
  // Not generation_.load(): the first job may be posted before this thread starts running.
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const int64_t spin_until = NowNanos() + kSpinNanos;
      int iter = 0;
      while ((g = generation_.load(std::memory_order_acquire)) == seen) {
        TARMAC_PAUSE();
        if ((++iter & 255) != 0) continue;
        // Oversubscribed machines (tests in parallel, other processes): let whoever is
        // runnable have the core instead of burning our time slice.
        std::this_thread::yield();
        if (NowNanos() > spin_until) {
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          generation_.wait(seen, std::memory_order_seq_cst);
          sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        }
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    DoChunks(thread_index);
    pending_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tarmac
