#include "control/degradation.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/check.h"

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
  if (up_ticks < 1) return InvalidField("controller_up_ticks", "up ticks must be >= 1, got {}", up_ticks);
  if (down_ticks < 1) return InvalidField("controller_down_ticks", "down ticks must be >= 1, got {}", down_ticks);
  if (!positive(recover_ratio) || recover_ratio > 1)
    return InvalidField("controller_recover_ratio", "the recover ratio must be in (0, 1], got {}", recover_ratio);
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

void DegradationMachine::Latch::Update(bool is_over, bool is_clear, int32_t up, int32_t down) {
  over = is_over ? over + 1 : 0;
  clear = is_clear ? clear + 1 : 0;
  if (!on && over >= up) on = true;
  if (on && clear >= down) on = false;
}

DegradationMachine::DegradationMachine(ControllerConfig config) : config_(std::move(config)) {
  TARMAC_CHECK(config_.Validate().ok());
}

DegradationMachine::Causes DegradationMachine::Evaluate(const ModelSignals& s) const {
  Causes c;
  double worst_prot = 0;
  // One latency cause: over when above its target, clear when below recover_ratio of it.
  auto judge = [&](Cause* cause, const TierSignal& t, const char* what, double p99, double target, int64_t n,
                   double* ratio) {
    *ratio = 0;
    if (n < config_.min_samples || !std::isfinite(p99)) return;  // no estimate
    *ratio = p99 / target;
    if (*ratio > 1) {
      cause->over = true;
      cause->detail = fmt::format("tier {} p99 {} {:.1f} ms > {:.1f} ms ({} requests)", t.tier, what, p99 * 1e3,
                                  target * 1e3, n);
    }
    if (*ratio >= config_.recover_ratio) cause->clear = false;
  };
  for (const TierSignal& t : s.tiers) {
    double rt = 0, rp = 0;
    judge(&c.ttft, t, "TTFT", t.p99_ttft_s, t.ttft_target_s, t.samples, &rt);
    judge(&c.tpot, t, "TPOT", t.p99_tpot_s, t.tpot_target_s, t.tpot_samples, &rp);
    if (!t.is_protected) continue;
    if (rt >= config_.recover_ratio || rp >= config_.recover_ratio) c.prot.clear = false;
    if (std::max(rt, rp) > 1 && std::max(rt, rp) > worst_prot) {
      worst_prot = std::max(rt, rp);
      c.prot.over = true;
      c.prot_reason = rt >= rp ? "ttft_slo" : "tpot_slo";
      c.prot.detail = rt >= rp ? c.ttft.detail : c.tpot.detail;
    }
  }
  c.kv.over = s.kv_usage >= config_.kv_high;
  c.kv.clear = s.kv_usage < config_.kv_low;
  if (c.kv.over) c.kv.detail = fmt::format("KV usage {:.0f}% >= {:.0f}%", s.kv_usage * 100, config_.kv_high * 100);
  return c;
}

void DegradationMachine::UpdateLevel(const Causes& c, double now_s, std::vector<Transition>* out) {
  const bool over = c.ttft.over || c.tpot.over || c.kv.over;
  const bool clear = c.ttft.clear && c.tpot.clear && c.kv.clear;
  over_ticks_ = over ? over_ticks_ + 1 : 0;
  clear_ticks_ = clear ? clear_ticks_ + 1 : 0;
  Level next = plan_.level;
  std::string reason, detail;
  if (over_ticks_ >= config_.up_ticks && plan_.level != Level::kShedding) {
    next = static_cast<Level>(static_cast<int>(plan_.level) + 1);
    over_ticks_ = 0;
    const Cause& why = c.ttft.over ? c.ttft : c.tpot.over ? c.tpot : c.kv;
    reason = c.ttft.over ? "ttft_slo" : c.tpot.over ? "tpot_slo" : "kv_high";
    detail = why.detail;
  } else if (clear_ticks_ >= config_.down_ticks && plan_.level != Level::kNormal) {
    next = static_cast<Level>(static_cast<int>(plan_.level) - 1);
    clear_ticks_ = 0;
    reason = "recovered";
  }
  if (next == plan_.level) return;
  if (out)
    out->push_back({next > plan_.level ? "escalate" : "relax", reason,
                    fmt::format("{} -> {}{}{}", LevelName(plan_.level), LevelName(next), detail.empty() ? "" : ": ", detail)});
  plan_.level = next;
  level_since_s_ = now_s;
}

std::map<Measure, std::string> DegradationMachine::Measures(bool can_route_smaller) const {
  std::map<Measure, std::string> m;
  const Level l = plan_.level;
  if (l >= Level::kPressured && tpot_.on) m[Measure::kCapBatchedTokens] = "tpot_slo";
  if (l >= Level::kPressured && kv_.on) m[Measure::kHoldLowPriority] = "kv_high";
  if (l >= Level::kDegraded && prot_.on) {
    m[Measure::kCapMaxTokens] = prot_reason_;
    if (can_route_smaller) m[Measure::kRouteSmaller] = prot_reason_;
  }
  if (l >= Level::kDegraded && (prot_.on || tpot_.on)) m[Measure::kSpeculationOff] = prot_.on ? prot_reason_ : "tpot_slo";
  if (l >= Level::kDegraded && kv_.on) m[Measure::kEvictCached] = "kv_high";
  if (l >= Level::kShedding && prot_.on) m[Measure::kShedLowestTier] = prot_reason_;
  if (l >= Level::kShedding && kv_.on) m[Measure::kPreemptLowPriority] = "kv_high";
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
  const bool tpot_pressure = plan_.level >= Level::kPressured && tpot_.on;
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
  const std::map<Measure, std::string> expected = Measures(plan_.Has(Measure::kRouteSmaller));
  for (const auto& [m, reason] : plan_.measures) {
    if (expected.count(m) == 0)
      return Internal("measure {} is in force at level {} without its cause", MeasureName(m), LevelName(plan_.level));
  }
  if (expected.size() != plan_.measures.size()) return Internal("a latched cause's measure is missing at level {}", LevelName(plan_.level));
  for (const auto& [b, cap] : plan_.k_caps)
    if (cap.k < 0 || cap.k > 16) return Internal("bucket {}'s k cap {} is out of range", b, cap.k);
  if (over_ticks_ < 0 || clear_ticks_ < 0) return Internal("negative hysteresis counts");
  return Status::Ok();
}

const ControlPlan& DegradationMachine::Update(const ModelSignals& s, std::vector<Transition>* out) {
  const Causes c = Evaluate(s);
  const int32_t up = config_.up_ticks, down = config_.down_ticks;
  ttft_.Update(c.ttft.over, c.ttft.clear, up, down);
  tpot_.Update(c.tpot.over, c.tpot.clear, up, down);
  prot_.Update(c.prot.over, c.prot.clear, up, down);
  kv_.Update(c.kv.over, c.kv.clear, up, down);
  if (c.prot.over) prot_reason_ = c.prot_reason;
  UpdateLevel(c, s.now_s, out);
  std::map<Measure, std::string> next = Measures(s.can_route_smaller);
  for (const auto& [m, reason] : next) {
    if (plan_.measures.count(m) != 0) continue;
    const bool tpot_only = m == Measure::kCapBatchedTokens || (m == Measure::kSpeculationOff && !prot_.on);
    const Cause& why = reason == "kv_high" ? c.kv : tpot_only ? c.tpot : c.prot;
    if (out) out->push_back({MeasureName(m), reason, why.detail});
  }
  for (const auto& [m, reason] : plan_.measures)
    if (next.count(m) == 0 && out) out->push_back({std::string("lift_") + MeasureName(m), "recovered", ""});
  plan_.measures = std::move(next);
  UpdateKCaps(s, out);
  return plan_;
}

}  // namespace tarmac::control
