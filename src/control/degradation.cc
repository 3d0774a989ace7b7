#include "control/degradation.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/check.h"
#include "speculative/spec_policy.h"

namespace tarmac::control {

const char* LevelName(Level l) {
  switch (l) {
    case Level::kNormal: return "normal";
    case Level::kPressured: return "pressured";
    case Level::kDegraded: return "degraded";
    case Level::kShedding: return "shedding";
  }
  return "?";
}

const char* MeasureName(Measure m) {
  switch (m) {
    case Measure::kDeprioritizeLowestTier: return "deprioritize_lowest_tier";
    case Measure::kCapBatchedTokens: return "cap_batched_tokens";
    case Measure::kHoldLowPriority: return "hold_low_priority";
    case Measure::kCapMaxTokens: return "cap_max_tokens";
    case Measure::kSpeculationOff: return "speculation_off";
    case Measure::kRouteSmaller: return "route_smaller";
    case Measure::kEvictCached: return "evict_cached";
    case Measure::kShedLowestTier: return "shed_lowest_tier";
    case Measure::kPreemptLowPriority: return "preempt_low_priority";
  }
  return "?";
}

Status ControllerConfig::Validate() const {
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  auto fraction = [](double v) { return std::isfinite(v) && v >= 0 && v <= 1; };
  if (!positive(interval_s)) return InvalidField("--controller-interval", "--controller-interval must be > 0 s, got {}", interval_s);
  if (!positive(window_s) || window_s < interval_s)
    return InvalidField("--controller-window", "--controller-window must be >= --controller-interval ({} s), got {}", interval_s, window_s);
  if (min_samples < 1) return InvalidField("--controller-min-samples", "--controller-min-samples must be >= 1, got {}", min_samples);
  if (!std::isfinite(sparse_lookback_windows) || sparse_lookback_windows < 1)
    return InvalidField("controller_sparse_lookback_windows", "the sparse lookback must be >= 1 window, got {}",
                        sparse_lookback_windows);
  if (up_ticks < 1) return InvalidField("controller_up_ticks", "up ticks must be >= 1, got {}", up_ticks);
  if (down_ticks < 1) return InvalidField("controller_down_ticks", "down ticks must be >= 1, got {}", down_ticks);
  if (!positive(recover_ratio) || recover_ratio > 1)
    return InvalidField("controller_recover_ratio", "the recover ratio must be in (0, 1], got {}", recover_ratio);
  if (!(severe_ratio > 1))
    return InvalidField("controller_severe_ratio", "the severe ratio must be > 1, got {}", severe_ratio);
  if (!fraction(kv_high) || kv_high == 0)
    return InvalidField("--kv-high-watermark", "--kv-high-watermark must be in (0, 1], got {}", kv_high);
  if (!fraction(kv_low) || kv_low >= kv_high)
    return InvalidField("--kv-low-watermark", "--kv-low-watermark must be in [0, {}) (below --kv-high-watermark), got {}", kv_high, kv_low);
  if (!fraction(spec_off_acceptance) || !fraction(spec_short_acceptance) || !fraction(spec_keep_acceptance))
    return InvalidField("--spec-off-acceptance", "acceptance thresholds must be in [0, 1], got {} / {} / {}", spec_off_acceptance, spec_short_acceptance, spec_keep_acceptance);
  if (spec_min_draft_tokens < 1)
    return InvalidField("spec_min_draft_tokens", "min draft tokens must be >= 1, got {}", spec_min_draft_tokens);
  if (!positive(spec_reprobe_s)) return InvalidField("--spec-reprobe", "--spec-reprobe must be > 0 s, got {}", spec_reprobe_s);
  if (!positive(batched_tokens_fraction) || batched_tokens_fraction > 1)
    return InvalidField("batched_tokens_fraction", "the batched-tokens fraction must be in (0, 1], got {}", batched_tokens_fraction);
  if (min_batched_tokens < 1)
    return InvalidField("min_batched_tokens", "min batched tokens must be >= 1, got {}", min_batched_tokens);
  if (max_tokens_cap < 1) return InvalidField("--controller-max-tokens", "--controller-max-tokens must be >= 1, got {}", max_tokens_cap);
  return Status::Ok();
}

DegradationMachine::DegradationMachine(ControllerConfig config) : config_(std::move(config)) {
  TARMAC_CHECK(config_.Validate().ok());
}

std::array<DegradationMachine::Judged, DegradationMachine::kCauses> DegradationMachine::Evaluate(
    const ModelSignals& s) const {
  std::array<Judged, kCauses> j;
  j[kTtft].reason = "ttft_slo";
  j[kTpot].reason = "tpot_slo";
  j[kProtected].reason = "ttft_slo";
  j[kKv].reason = "kv_high";
  double worst_protected = 0;
  // One latency target of one tier: over above it, not clear at recover_ratio of it or above.
  // Over on the requests that ended after the last level change (samples_after < 0: the
  // window's figures stand for them).
  auto over_after = [&](double p99_after, double target, int64_t n_after, bool over_window) {
    if (n_after < 0) return over_window;
    return n_after >= config_.min_samples && std::isfinite(p99_after) && p99_after > target;
  };
  auto judge = [&](Judged* cause, const TierSignal& t, const char* what, double p99, double target, int64_t n,
                   bool after) {
    if (n < config_.min_samples || !std::isfinite(p99)) return 0.0;  // no estimate
    const double ratio = p99 / target;
    if (ratio > 1) {
      cause->over = true;
      cause->over_after = cause->over_after || after || ratio > config_.severe_ratio;
      cause->detail = fmt::format("tier {} p99 {} {:.1f} ms > {:.1f} ms ({} requests)", t.tier, what, p99 * 1e3,
                                  target * 1e3, n);
    }
    if (ratio >= config_.recover_ratio) cause->clear = false;
    return ratio;
  };
  for (const TierSignal& t : s.tiers) {
    const bool ttft_after = over_after(t.p99_ttft_after_s, t.ttft_target_s, t.samples_after, t.p99_ttft_s > t.ttft_target_s);
    const bool tpot_after =
        over_after(t.p99_tpot_after_s, t.tpot_target_s, t.tpot_samples_after, t.p99_tpot_s > t.tpot_target_s);
    const double rt = judge(&j[kTtft], t, "TTFT", t.p99_ttft_s, t.ttft_target_s, t.samples, ttft_after);
    const double rp = judge(&j[kTpot], t, "TPOT", t.p99_tpot_s, t.tpot_target_s, t.tpot_samples, tpot_after);
    if (!t.is_protected) continue;
    Judged& p = j[kProtected];
    if ((rt > 1 && ttft_after) || (rp > 1 && tpot_after) || std::max(rt, rp) > config_.severe_ratio) p.over_after = true;
    if (rt >= config_.recover_ratio || rp >= config_.recover_ratio) p.clear = false;
    if (std::max(rt, rp) > 1 && std::max(rt, rp) > worst_protected) {
      worst_protected = std::max(rt, rp);
      p.over = true;
      p.reason = rt >= rp ? "ttft_slo" : "tpot_slo";
      p.detail = rt >= rp ? j[kTtft].detail : j[kTpot].detail;
    }
  }
  j[kKv].over = j[kKv].over_after = s.kv_usage >= config_.kv_high;  // read now: no lag
  j[kKv].clear = s.kv_usage < config_.kv_low;
  if (j[kKv].over) j[kKv].detail = fmt::format("KV usage {:.0f}% >= {:.0f}%", s.kv_usage * 100, config_.kv_high * 100);
  return j;
}

void DegradationMachine::UpdateLevels(const std::array<Judged, kCauses>& j, double now_s, std::vector<Transition>* out) {
  Level worst = Level::kNormal;
  int rose = -1;  // the cause whose rise made the state rise, for the log
  for (int c = 0; c < kCauses; ++c) {
    CauseLevel& cl = causes_[static_cast<size_t>(c)];
    cl.over = j[c].over ? cl.over + 1 : 0;
    cl.clear = j[c].clear ? cl.clear + 1 : 0;
    if (j[c].over) cl.reason = j[c].reason;
    // Above normal a further rise waits for evidence from after the last change, or for a
    // whole window after it (a tier too sparse to give that evidence).
    const bool evidence = j[c].over_after || now_s - level_since_s_ >= config_.window_s;
    const bool rise = cl.over >= config_.up_ticks && (cl.level == Level::kNormal || evidence);
    if (rise && cl.level != Level::kShedding) {
      cl.level = static_cast<Level>(static_cast<int>(cl.level) + 1);
      cl.over = 0;
      if (cl.level > plan_.level && (rose < 0 || cl.level > causes_[static_cast<size_t>(rose)].level)) rose = c;
    } else if (cl.clear >= config_.down_ticks && cl.level != Level::kNormal) {
      cl.level = static_cast<Level>(static_cast<int>(cl.level) - 1);
      cl.clear = 0;
    }
    worst = std::max(worst, cl.level);
  }
  if (worst == plan_.level) return;
  if (out) {
    const bool up = worst > plan_.level;
    const std::string& detail = up && rose >= 0 ? j[rose].detail : std::string();
    out->push_back({up ? "escalate" : "relax", up && rose >= 0 ? causes_[static_cast<size_t>(rose)].reason : "recovered",
                    fmt::format("{} -> {}{}{}", LevelName(plan_.level), LevelName(worst), detail.empty() ? "" : ": ", detail)});
  }
  plan_.level = worst;
  level_since_s_ = now_s;
}

std::map<Measure, std::string> DegradationMachine::Measures(bool can_route_smaller) const {
  std::map<Measure, std::string> m;
  const std::string& prot = causes_[kProtected].reason;
  if (At(kProtected, Level::kPressured)) {
    m[Measure::kDeprioritizeLowestTier] = prot;
    // Shorter prefill chunks: the protected tier's requests wait behind a shorter step.
    m[Measure::kCapBatchedTokens] = prot;
  }
  if (At(kProtected, Level::kDegraded)) {
    m[Measure::kCapMaxTokens] = prot;
    m[Measure::kSpeculationOff] = prot;
    if (can_route_smaller) m[Measure::kRouteSmaller] = prot;
  }
  if (At(kProtected, Level::kShedding)) m[Measure::kShedLowestTier] = prot;
  if (At(kTpot, Level::kPressured)) m[Measure::kCapBatchedTokens] = "tpot_slo";
  if (At(kTpot, Level::kDegraded) && m.count(Measure::kSpeculationOff) == 0) m[Measure::kSpeculationOff] = "tpot_slo";
  if (At(kKv, Level::kPressured)) m[Measure::kHoldLowPriority] = "kv_high";
  if (At(kKv, Level::kDegraded)) m[Measure::kEvictCached] = "kv_high";
  if (At(kKv, Level::kShedding)) m[Measure::kPreemptLowPriority] = "kv_high";
  return m;
}

void DegradationMachine::UpdateKCaps(const ModelSignals& s, std::vector<Transition>* out) {
  // Lift caps that have stood long enough: the bucket is measured again.
  for (auto it = plan_.k_caps.begin(); it != plan_.k_caps.end();) {
    if (s.now_s - it->second.since_s >= config_.spec_reprobe_s || s.spec_max_k == 0) {
      if (out) out->push_back({"lift_spec_bucket_k", "reprobe", "", it->first});
      it = plan_.k_caps.erase(it);
    } else {
      ++it;
    }
  }
  if (s.spec_max_k == 0) return;
  const bool tpot_pressure = At(kTpot, Level::kPressured);
  for (const BucketSpecSignal& b : s.spec) {
    if (b.draft_tokens < config_.spec_min_draft_tokens || plan_.k_caps.count(b.bucket) != 0) continue;
    const double a = static_cast<double>(b.accepted_tokens) / static_cast<double>(b.draft_tokens);
    BucketCap cap;
    if (a < config_.spec_off_acceptance) {
      cap = {0, "low_acceptance", a, s.now_s};
    } else if (a < config_.spec_short_acceptance) {
      cap = {std::max(1, s.spec_max_k / 2), "low_acceptance", a, s.now_s};
    } else if (tpot_pressure && a < config_.spec_keep_acceptance) {
      cap = {0, "tpot_slo", a, s.now_s};
    } else {
      continue;
    }
    if (out)
      out->push_back({"spec_bucket_k", cap.reason,
                      fmt::format("k <= {} (acceptance {:.2f} over {} draft tokens)", cap.k, a, b.draft_tokens),
                      b.bucket});
    plan_.k_caps[b.bucket] = cap;
  }
}

Status DegradationMachine::CheckIntegrity() const {
  Level worst = Level::kNormal;
  for (const CauseLevel& c : causes_) {
    worst = std::max(worst, c.level);
    if (c.over < 0 || c.clear < 0) return Internal("negative hysteresis counts");
  }
  if (worst != plan_.level) return Internal("state {} is not the worst cause's level {}", LevelName(plan_.level), LevelName(worst));
  const std::map<Measure, std::string> expected = Measures(plan_.Has(Measure::kRouteSmaller));
  if (expected != plan_.measures) return Internal("the measures in force are not those of the causes' levels");
  for (const auto& [b, cap] : plan_.k_caps)
    if (cap.k < 0 || cap.k > speculative::kMaxDraft) return Internal("bucket {}'s k cap {} is out of range", b, cap.k);
  return Status::Ok();
}

const ControlPlan& DegradationMachine::Update(const ModelSignals& s, std::vector<Transition>* out) {
  const std::array<Judged, kCauses> j = Evaluate(s);
  UpdateLevels(j, s.now_s, out);
  std::map<Measure, std::string> next = Measures(s.can_route_smaller);
  for (const auto& [m, reason] : next) {
    if (plan_.measures.count(m) != 0) continue;
    // The cause whose numbers explain the measure, for the log.
    Cause c = kProtected;
    if (reason == "kv_high") c = kKv;
    else if (m == Measure::kCapBatchedTokens && At(kTpot, Level::kPressured)) c = kTpot;
    else if (m == Measure::kSpeculationOff && !At(kProtected, Level::kDegraded)) c = kTpot;
    if (out) out->push_back({MeasureName(m), reason, j[c].detail});
  }
  for (const auto& [m, reason] : plan_.measures)
    if (next.count(m) == 0 && out) out->push_back({std::string("lift_") + MeasureName(m), "recovered", ""});
  plan_.measures = std::move(next);
  UpdateKCaps(s, out);
  return plan_;
}

}  // namespace tarmac::control
