// DegradationMachine: one model's degradation state machine, pure (no threads, no engine):
// each tick it takes the model's signals (the SLA tiers' p99 TTFT / TPOT over the control
// window, KV usage, each bucket's draft acceptance over the window) and returns the plan of
// measures that should be in force. The Controller (controller.h) gathers the signals and
// applies the plan through engine knobs and admission.
//
// Levels: normal -> pressured -> degraded -> shedding, kept per cause and the model's state
// the worst of them. The causes: a tier's TTFT, a tier's TPOT, a protected tier (one above the
// lowest: slo_targets.h) over either target, and KV usage. A tick is "over" for a latency cause
// when an estimated tier (at least min_samples requests in the window; fewer is no estimate)
// is above its target, "clear" when every estimated tier is below recover_ratio x it; for KV,
// at or above kv_high and below kv_low. A tick in between is neither (the gap between the
// thresholds is the hysteresis). A cause's level rises one step after up_ticks consecutive
// over ticks and falls one step after down_ticks consecutive clear ticks, so measures are
// released one level at a time, not all at once. Above normal, a latency cause rises again
// only if the requests that ended after the last level change (at least min_samples of them)
// are over too, or a whole window after the change (a tier too sparse for that evidence), or
// the window's p99 is more than severe_ratio times its target (an overload that cannot wait):
// the window's p99 lags a measure by up to a window, and without this the state would climb
// to shedding before the first measure could show. The measures of each cause's level:
//   protected tier: pressured -> the lowest tiers' requests are admitted in the low priority
//                   class (scheduled after, preempted before the others) and the step's
//                   batched tokens capped (a short request waits behind a shorter prefill
//                   chunk); degraded -> the
//                   lowest tiers' max_tokens capped, speculation off, the lowest tiers to a
//                   smaller model where a route allows it (ModelSignals::can_route_smaller);
//                   shedding -> 429 + Retry-After for the lowest tiers;
//   TPOT:           pressured -> cap the step's batched tokens (decodes first, shorter prefill
//                   chunks) and no drafts for buckets whose acceptance is below
//                   spec_keep_acceptance (a k cap, below); degraded -> speculation off;
//   KV:             pressured -> stop admitting the lowest priority class (priority > 0);
//                   degraded -> evict cached prefixes; shedding -> preempt running requests of
//                   the lowest priority class;
//   TTFT (any tier, the lowest included): the state only (what would help is the protected
//                   tier's measures, and shedding a tier to speed up that same tier is not).
// Independently of the levels, a bucket whose acceptance over the window (at least
// spec_min_draft_tokens drafted) is below spec_off_acceptance gets no drafts (k cap 0), below
// spec_short_acceptance a halved k; such a cap is lifted after spec_reprobe_s so the bucket is
// measured again.
//
// With no estimates (no tier with min_samples, no bucket with enough drafts, KV below kv_high)
// the plan is empty: behaviour is exactly what it is without a controller.
//
// Not thread-safe (the controller's tick).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "metrics/request_bucket.h"

namespace tarmac::control {

enum class Level : uint8_t { kNormal, kPressured, kDegraded, kShedding };
const char* LevelName(Level l);  // "normal", "pressured", "degraded", "shedding"

struct ControllerConfig {
  double interval_s = 0.5;       // between ticks
  double window_s = 10;          // control window: tier p99s and draft acceptance
  int32_t min_samples = 8;       // requests of a tier in the window before its p99 counts
  // A tier with fewer than min_samples in the window (its requests are sparse, or so slow that
  // few end) is estimated from its last min_samples requests that ended within this many
  // windows (SloTracker::RecentTier); fewer than that is still no estimate.
  double sparse_lookback_windows = 4;
  int32_t up_ticks = 2;          // consecutive over ticks before rising a level
  int32_t down_ticks = 6;        // consecutive clear ticks before falling a level
  double recover_ratio = 0.8;    // p99 / target below this is clear
  double severe_ratio = 2;       // p99 / target above this rises without waiting for evidence
  double kv_high = 0.90;         // KV usage (request blocks / total) at or above: over
  double kv_low = 0.70;          // below: clear
  double spec_off_acceptance = 0.3;    // window acceptance below this: the bucket's k = 0
  double spec_short_acceptance = 0.5;  // below this (and not below the off one): its k halved
  double spec_keep_acceptance = 0.6;   // TPOT over: buckets below this draft nothing
  int64_t spec_min_draft_tokens = 64;  // drafted in the window before acceptance counts
  double spec_reprobe_s = 30;          // a bucket's k cap is lifted after this long
  double batched_tokens_fraction = 0.25;  // pressured on TPOT: budget x this (see MinBudget)
  int32_t min_batched_tokens = 32;
  int32_t max_tokens_cap = 64;   // degraded: the lowest tiers' max_tokens at most this
  // Errors name the field.
  Status Validate() const;
};

struct TierSignal {
  std::string tier;
  bool is_protected = false;  // ranked above the lowest tiers
  double ttft_target_s = 0, tpot_target_s = 0;
  int64_t samples = 0, tpot_samples = 0;   // in the control window
  double p99_ttft_s = 0, p99_tpot_s = 0;   // NaN: no samples
  // The same over the requests of the window that ended after the model's last level change
  // (DegradationMachine::level_since_s): the evidence a further rise needs. samples_after < 0:
  // not measured, the window's figures stand for it.
  int64_t samples_after = -1, tpot_samples_after = -1;
  double p99_ttft_after_s = 0, p99_tpot_after_s = 0;
};

struct BucketSpecSignal {
  metrics::BucketId bucket = metrics::kNoBucket;
  int64_t draft_tokens = 0, accepted_tokens = 0;  // in the control window
};

struct ModelSignals {
  double now_s = 0;
  std::vector<TierSignal> tiers;  // tiers with targets only
  double kv_usage = 0;            // request blocks / total blocks
  std::vector<BucketSpecSignal> spec;
  int32_t spec_max_k = 0;         // the engine's baseline k (0: it does not speculate)
  bool can_route_smaller = false; // a route lets the lowest tiers go to a smaller model
};

enum class Measure : uint8_t {
  kDeprioritizeLowestTier,
  kCapBatchedTokens,
  kHoldLowPriority,
  kCapMaxTokens,
  kSpeculationOff,
  kRouteSmaller,
  kEvictCached,
  kShedLowestTier,
  kPreemptLowPriority,
};
const char* MeasureName(Measure m);  // "cap_batched_tokens", ..., the action label

struct BucketCap {
  int32_t k = 0;
  std::string reason;  // "low_acceptance", "tpot_slo"
  double acceptance = 0;
  double since_s = 0;
  bool operator==(const BucketCap&) const = default;
};

struct ControlPlan {
  Level level = Level::kNormal;
  std::map<Measure, std::string> measures;        // in force -> reason ("ttft_slo", ...)
  std::map<metrics::BucketId, BucketCap> k_caps;  // per-bucket draft caps
  bool Has(Measure m) const { return measures.count(m) != 0; }
  bool operator==(const ControlPlan&) const = default;
};

// What changed in one tick, for the log and the action counters.
struct Transition {
  std::string action;  // a MeasureName, "lift_" + one, "spec_bucket_k", "lift_spec_bucket_k", "escalate", "relax"
  std::string reason;  // "ttft_slo", "tpot_slo", "kv_high", "low_acceptance", "recovered", "reprobe"
  std::string detail;  // human-readable: the numbers behind it
  metrics::BucketId bucket = metrics::kNoBucket;  // the k-cap actions' bucket
};

class DegradationMachine {
 public:
  // Preconditions: config.Validate().ok() (asserted).
  explicit DegradationMachine(ControllerConfig config);

  // One tick; appends what changed to *out (may be null). Returns the plan now in force.
  const ControlPlan& Update(const ModelSignals& s, std::vector<Transition>* out);
  const ControlPlan& plan() const { return plan_; }
  double level_since_s() const { return level_since_s_; }
  // The state is the worst cause's level; every measure in force belongs to a cause's level;
  // k caps are within [0, kMaxDraft]; hysteresis counts are not negative.
  Status CheckIntegrity() const;
  const ControllerConfig& config() const { return config_; }

 private:
  enum Cause { kTtft, kTpot, kProtected, kKv, kCauses };
  // One tick's judgement of a cause.
  struct Judged {
    bool over = false, clear = true;
    bool over_after = false;  // also over on the requests that ended after the last change
    std::string reason;  // "ttft_slo", "tpot_slo", "kv_high"
    std::string detail;  // the numbers behind the worst over
  };
  // A cause's level with its hysteresis counts.
  struct CauseLevel {
    Level level = Level::kNormal;
    int32_t over = 0, clear = 0;
    std::string reason;  // of its latest over tick
  };
  std::array<Judged, kCauses> Evaluate(const ModelSignals& s) const;
  // Moves each cause's level; appends the model's state change, if any.
  void UpdateLevels(const std::array<Judged, kCauses>& j, double now_s, std::vector<Transition>* out);
  std::map<Measure, std::string> Measures(bool can_route_smaller) const;
  void UpdateKCaps(const ModelSignals& s, std::vector<Transition>* out);
  bool At(Cause c, Level l) const { return causes_[c].level >= l; }

  const ControllerConfig config_;
  std::array<CauseLevel, kCauses> causes_;
  double level_since_s_ = 0;
  ControlPlan plan_;
};

}  // namespace tarmac::control
