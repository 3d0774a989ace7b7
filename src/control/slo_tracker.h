// SloTracker: per-request SLO bookkeeping, fed by every engine as requests end
// (EngineConfig::on_request_finished). Per model and request bucket it counts requests,
// tokens, prefix-cache savings and SLO attainment (TTFT and TPOT against the bucket's tier
// targets) over a sliding report window and since start, and keeps since-start latency
// quantiles (a uniform sample of up to 4096 values per series: exact until then, where the
// registry's histograms only bound them by bucket edges); per model and SLA tier it keeps the
// p99 TTFT and TPOT over the (shorter) control window that the controller acts on.
//
// Attainment: a request that ended by stop or length meets its tier's SLO when its TTFT and
// its TPOT (mean gap after the first token; not judged with one token) are within the
// targets. A failed request (engine error) misses; a cancelled one (client gone, timeout) is
// counted apart and not judged. Buckets of a tier without targets have no attainment.
//
// Owns its counts and windows; borrows the registry's BucketTable (for each bucket's tier).
// Thread-safe (one mutex; Observe is a few map lookups and adds, cheap enough for the step
// thread). Times are NowSeconds().
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/slo_targets.h"
#include "engine/engine_types.h"
#include "metrics/registry.h"
#include "metrics/window_quantiles.h"

namespace tarmac::control {

// Requests of one bucket over some span.
struct SloCounts {
  int64_t requests = 0;        // ended, any reason
  int64_t errors = 0;          // ended by an engine error
  int64_t cancelled = 0;       // cancelled (not judged)
  int64_t judged = 0;          // judged against targets (requests of a tier with targets)
  int64_t met = 0;             // TTFT and TPOT within the targets
  int64_t ttft_met = 0;
  int64_t tpot_met = 0;        // of those with a TPOT (2+ tokens)
  int64_t tpot_judged = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // prefill tokens the prefix cache saved
  int64_t output_tokens = 0;
  void Add(const SloCounts& o);
  // met / judged, NaN when nothing was judged.
  double attainment() const;
};

// p50 / p95 / p99 in milliseconds over `count` values (NaN when none).
struct LatencyQuantiles {
  int64_t count = 0;
  double p50 = 0, p95 = 0, p99 = 0;
};

struct BucketSlo {
  SloCounts window;  // the report window
  SloCounts total;   // since start
  LatencyQuantiles ttft_ms, tpot_ms, e2e_ms, queue_ms;  // since start (ended requests)
};

// A tier's latency over the control window (finished requests only).
struct TierLatency {
  int64_t samples = 0;       // requests with a first token
  int64_t tpot_samples = 0;  // of those, with 2+ tokens
  double p99_ttft_s = 0;     // NaN when no samples
  double p99_tpot_s = 0;     // NaN when no TPOT samples
};

class SloTracker {
 public:
  // Preconditions: registry non-null; windows > 0 (asserted).
  SloTracker(std::shared_ptr<metrics::Registry> registry, SloTargets targets, double report_window_s = 60,
             double control_window_s = 10, double now_s = 0);

  // One ended request of `model`.
  void Observe(const std::string& model, const engine::RequestMetrics& m, engine::FinishReason reason,
               double now_s);
  // The engine hook for one model (copies `model`; the tracker must outlive the engine).
  std::function<void(const engine::RequestMetrics&, engine::FinishReason, double)> HookFor(std::string model);

  // Every bucket of `model` seen so far.
  std::map<metrics::BucketId, BucketSlo> Buckets(const std::string& model, double now_s) const;
  TierLatency Tier(const std::string& model, const std::string& tier, double now_s) const;
  // The same over the tier's last n ended requests (at most kRecent) that ended at or after
  // since_s, however many control windows ago: a sparse tier's estimate when too few of its
  // requests end within one window (the controller's lookback). p99 by nearest rank.
  static constexpr int32_t kRecent = 64;
  TierLatency RecentTier(const std::string& model, const std::string& tier, int32_t n, double since_s) const;
  // Models that have ended at least one request.
  std::vector<std::string> Models() const;
  // Per bucket: the window's counts within the totals, judged within requests, met within
  // judged. Thread-safe.
  Status CheckIntegrity(double now_s) const;

  const SloTargets& targets() const { return targets_; }
  const metrics::BucketTable& buckets() const { return registry_->buckets(); }
  double report_window_s() const { return report_window_s_; }
  double control_window_s() const { return control_window_s_; }
  double start_s() const { return start_s_; }

 private:
  // Counts in one-second slices over the report window, and since-start samples.
  struct Ring {
    std::vector<std::pair<int64_t, SloCounts>> slices;  // (second, counts), [window seconds]
    SloCounts total;
    std::unique_ptr<metrics::WindowQuantiles> ttft, tpot, e2e, queue;  // one endless slice each
    void Add(const SloCounts& c, double now_s);
    SloCounts Window(double now_s) const;
  };
  struct TierWindows {
    metrics::WindowQuantiles ttft, tpot;
    struct Ended {
      double time_s, ttft_s, tpot_s;  // tpot_s NaN: fewer than 2 tokens
    };
    std::deque<Ended> recent;  // the last kRecent, oldest first
    explicit TierWindows(double w) : ttft(w), tpot(w) {}
  };

  std::shared_ptr<metrics::Registry> registry_;
  const SloTargets targets_;
  const double report_window_s_, control_window_s_, start_s_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, metrics::BucketId>, Ring> buckets_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<TierWindows>> tiers_;
};

}  // namespace tarmac::control
