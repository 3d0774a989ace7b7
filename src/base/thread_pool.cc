#include "base/thread_pool.h"

#include <algorithm>

#include "base/check.h"
#include "base/clock.h"
#include "base/cpu_affinity.h"

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
// How long the caller, done with its own chunks, waits for a worker to start its first
// chunk before running it itself. A running worker starts within a microsecond; one that
// sleeps takes tens of microseconds to wake, one that is descheduled milliseconds.
constexpr int64_t kStealAfterNanos = 50'000;
}  // namespace

int ThreadPool::DefaultThreads() { return static_cast<int>(AllowedCpus().size()); }

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads), slots_(num_threads > 0 ? num_threads : 1) {
  TARMAC_CHECK(num_threads >= 1);
  workers_.reserve(num_threads - 1);
  for (int t = 1; t < num_threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

Status ThreadPool::PinWorkers(const std::vector<int>& cpus) {
  for (int t = 1; t < num_threads_; ++t)
    TARMAC_RETURN_IF_ERROR(PinThread(workers_[t - 1], ThreadCpus(cpus, num_threads_, t)));
  return Status::Ok();
}

Status ThreadPool::PinWithCaller(const std::vector<int>& cpus) {
  TARMAC_RETURN_IF_ERROR(PinWorkers(cpus));
  return PinCurrentThread(ThreadCpus(cpus, num_threads_, 0));
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  job_.generation.fetch_add(1, std::memory_order_seq_cst);
  job_.generation.notify_all();
  for (auto& w : workers_) w.join();
}

int ThreadPool::GuidedBounds(int64_t n, int64_t min_grain, int64_t* bounds) const {
  TARMAC_CHECK(n >= 0 && min_grain >= 1);
  bounds[0] = 0;
  int chunks = 0;
  int64_t at = 0;
  const int64_t first = std::max<int64_t>(min_grain, n * 2 / (3 * num_threads_));
  for (int t = 0; t < num_threads_ && at < n; ++t) bounds[++chunks] = at = std::min(n, at + first);
  while (at < n) {
    const int64_t grain = chunks + 1 == kMaxGuidedChunks
                              ? n - at
                              : std::max(min_grain, (n - at) / (2 * num_threads_));
    bounds[++chunks] = at = std::min(n, at + grain);
  }
  return chunks;
}

bool ThreadPool::ClaimFirst(int chunk, uint64_t gen) {
  std::atomic<uint64_t>& claimed = slots_[chunk].claimed;
  uint64_t prev = claimed.load(std::memory_order_relaxed);
  while (prev < gen) {
    if (claimed.compare_exchange_weak(prev, gen, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void ThreadPool::RunChunk(const JobView& job, int64_t chunk, int thread_index) const {
  const int64_t b = chunk * job.grain;
  const int64_t e = b + job.grain < job.n ? b + job.grain : job.n;
  job.fn(job.ctx, b, e, thread_index);
}

int64_t ThreadPool::RunDynamic(const JobView& job, int thread_index) {
  if (job.chunks <= num_threads_) return 0;
  int64_t ran = 0;
  for (;;) {
    const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks) return ran;
    RunChunk(job, c, thread_index);
    ++ran;
  }
}

void ThreadPool::Run(int64_t n, int64_t grain, void* ctx, TaskFn fn) {
  TARMAC_CHECK(n >= 0 && grain >= 1);
  if (n == 0) return;
  if (workers_.empty() || n <= grain) {
    for (int64_t b = 0; b < n; b += grain) fn(ctx, b, b + grain < n ? b + grain : n, 0);
    return;
  }
  const JobView job{fn, ctx, n, grain, (n + grain - 1) / grain};
  job_.fn.store(fn, std::memory_order_relaxed);
  job_.ctx.store(ctx, std::memory_order_relaxed);
  job_.n.store(n, std::memory_order_relaxed);
  job_.grain.store(grain, std::memory_order_relaxed);
  job_.chunks.store(job.chunks, std::memory_order_relaxed);
  // No participant of the previous job still claims from the counter: the caller waited for
  // every worker that ran a chunk, and a worker claims dynamically only after running its
  // first-round chunk.
  next_chunk_.store(num_threads_, std::memory_order_relaxed);
  // First-round chunks this job lacks are claimed up front: a worker still reading the fields
  // of a finished job may see this job's chunk count, and must fail the old job's claim.
  const uint64_t gen = job_.generation.load(std::memory_order_relaxed) + 1;
  for (int64_t t = job.chunks; t < num_threads_; ++t)
    slots_[t].claimed.store(gen, std::memory_order_relaxed);
  job_.generation.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) job_.generation.notify_all();

  // Chunk 0 is the caller's alone: workers claim their own index, and steals start at 1.
  RunChunk(job, 0, 0);
  int64_t done = 1 + RunDynamic(job, 0);
  // Wait for the workers' reports; take over first-round chunks nobody started in time.
  const int first_round = job.chunks < num_threads_ ? static_cast<int>(job.chunks) : num_threads_;
  bool late = false;
  int64_t waiting_since = 0;  // read lazily: most jobs finish before the first check
  for (int spins = 0;;) {
    int64_t total = done;
    for (int t = 1; t < first_round; ++t) {
      if (slots_[t].done_gen.load(std::memory_order_acquire) == gen)
        total += slots_[t].done_chunks.load(std::memory_order_relaxed);
    }
    if (total == job.chunks) return;
    if (!late && (++spins & 63) == 0) {
      const int64_t now = NowNanos();
      if (waiting_since == 0) waiting_since = now;
      late = now - waiting_since > kStealAfterNanos;
    }
    if (late) {
      for (int t = 1; t < first_round; ++t) {
        if (ClaimFirst(t, gen)) {
          RunChunk(job, t, 0);
          ++done;
        }
      }
      std::this_thread::yield();  // a worker may have been descheduled; give it the core
    } else {
      TARMAC_PAUSE();
    }
  }
}

void ThreadPool::WorkerLoop(int thread_index) {
  // Not generation.load(): the first job may be posted before this thread starts running.
  uint64_t seen = 0;
  Slot& slot = slots_[thread_index];
  for (;;) {
    uint64_t g = job_.generation.load(std::memory_order_acquire);
    if (g == seen) {
      const int64_t spin_until = NowNanos() + kSpinNanos;
      int iter = 0;
      while ((g = job_.generation.load(std::memory_order_acquire)) == seen) {
        TARMAC_PAUSE();
        if ((++iter & 255) != 0) continue;
        // Oversubscribed machines (tests in parallel, other processes): let whoever is
        // runnable have the core instead of burning our time slice.
        std::this_thread::yield();
        if (NowNanos() > spin_until) {
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          job_.generation.wait(seen, std::memory_order_seq_cst);
          sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        }
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    const JobView job{job_.fn.load(std::memory_order_relaxed),
                      job_.ctx.load(std::memory_order_relaxed),
                      job_.n.load(std::memory_order_relaxed),
                      job_.grain.load(std::memory_order_relaxed),
                      job_.chunks.load(std::memory_order_relaxed)};
    // Run our first-round chunk unless the caller took it over (or this job has none for
    // us), and only then claim more: a worker that claims nothing never touches the job, so
    // the caller need not wait for it. (Fields torn by the next job's writes are harmless:
    // they can only be read once this job is complete, and then the claim fails, chunks this
    // job lacks included.)
    if (thread_index >= job.chunks || !ClaimFirst(thread_index, g)) continue;
    RunChunk(job, thread_index, thread_index);
    const int64_t ran = 1 + RunDynamic(job, thread_index);
    slot.done_chunks.store(ran, std::memory_order_relaxed);
    slot.done_gen.store(g, std::memory_order_release);
  }
}

}  // namespace tarmac
