#include "control/slo_tracker.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace tarmac::control {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A "window" longer than any run, in one slice: a uniform sample of everything since start.
constexpr double kForever = 1e15;

std::unique_ptr<metrics::WindowQuantiles> SinceStart() {
  return std::make_unique<metrics::WindowQuantiles>(kForever, 1, 4096);
}

LatencyQuantiles Read(const metrics::WindowQuantiles& w, double now_s) {
  static const double kQ[] = {0.5, 0.95, 0.99};
  const metrics::WindowQuantiles::Summary s = w.Read(kQ, now_s);
  return {static_cast<int64_t>(s.count), s.quantiles[0] * 1e3, s.quantiles[1] * 1e3, s.quantiles[2] * 1e3};
}

}  // namespace

void SloCounts::Add(const SloCounts& o) {
  requests += o.requests;
  errors += o.errors;
  cancelled += o.cancelled;
  judged += o.judged;
  met += o.met;
  ttft_met += o.ttft_met;
  tpot_met += o.tpot_met;
  tpot_judged += o.tpot_judged;
  prompt_tokens += o.prompt_tokens;
  cached_prompt_tokens += o.cached_prompt_tokens;
  output_tokens += o.output_tokens;
}

double SloCounts::attainment() const { return judged > 0 ? static_cast<double>(met) / judged : kNaN; }

void SloTracker::Ring::Add(const SloCounts& c, double now_s) {
  const int64_t sec = static_cast<int64_t>(std::floor(now_s));
  auto& slot = slices[static_cast<size_t>(((sec % static_cast<int64_t>(slices.size())) + static_cast<int64_t>(slices.size())) %
                                          static_cast<int64_t>(slices.size()))];
  if (slot.first != sec) slot = {sec, SloCounts{}};
  slot.second.Add(c);
  total.Add(c);
}

SloCounts SloTracker::Ring::Window(double now_s) const {
  const int64_t sec = static_cast<int64_t>(std::floor(now_s));
  const int64_t n = static_cast<int64_t>(slices.size());
  SloCounts w;
  for (const auto& [s, c] : slices)
    if (s > sec - n && s <= sec) w.Add(c);
  return w;
}

SloTracker::SloTracker(std::shared_ptr<metrics::Registry> registry, SloTargets targets, double report_window_s,
                       double control_window_s, double now_s)
    : registry_(std::move(registry)), targets_(std::move(targets)), report_window_s_(report_window_s),
      control_window_s_(control_window_s), start_s_(now_s) {
  TARMAC_CHECK(registry_ != nullptr);
  TARMAC_CHECK(report_window_s_ >= 1 && control_window_s_ > 0);
}

void SloTracker::Observe(const std::string& model, const engine::RequestMetrics& m, engine::FinishReason reason,
                         double now_s) {
  if (m.bucket == metrics::kNoBucket) return;
  const std::string& tier = registry_->buckets().Get(m.bucket).sla;
  const TierSlo* slo = targets_.Find(tier);
  SloCounts c;
  c.requests = 1;
  c.prompt_tokens = m.prompt_tokens;
  c.cached_prompt_tokens = m.cached_prompt_tokens;
  c.output_tokens = m.output_tokens;
  const bool ok = reason == engine::FinishReason::kStop || reason == engine::FinishReason::kLength;
  const bool has_tpot = m.output_tokens > 1;
  const double tpot_s = has_tpot ? (m.e2e_s - m.ttft_s) / (m.output_tokens - 1) : 0.0;
  if (reason == engine::FinishReason::kCancelled) c.cancelled = 1;
  if (reason == engine::FinishReason::kError) c.errors = 1;
  if (slo != nullptr && reason != engine::FinishReason::kCancelled) {
    c.judged = 1;
    const bool ttft_ok = ok && m.output_tokens > 0 && m.ttft_s * 1e3 <= slo->ttft_ms;
    const bool tpot_ok = ok && (!has_tpot || tpot_s * 1e3 <= slo->tpot_ms);
    c.ttft_met = ttft_ok;
    c.tpot_judged = ok && has_tpot;
    c.tpot_met = ok && has_tpot && tpot_ok;
    c.met = ttft_ok && tpot_ok;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Ring& ring = buckets_[{model, m.bucket}];
  if (ring.slices.empty()) {
    ring.slices.assign(static_cast<size_t>(std::ceil(report_window_s_)), {INT64_MIN, SloCounts{}});
    ring.ttft = SinceStart();
    ring.tpot = SinceStart();
    ring.e2e = SinceStart();
    ring.queue = SinceStart();
  }
  ring.Add(c, now_s);
  // The same requests as the registry's histograms (EngineMetrics::RequestFinished).
  ring.e2e->Observe(m.e2e_s, now_s);
  ring.queue->Observe(m.queue_s, now_s);
  if (m.output_tokens > 0) ring.ttft->Observe(m.ttft_s, now_s);
  if (has_tpot) ring.tpot->Observe(tpot_s, now_s);
  if (!ok || m.output_tokens == 0) return;
  std::unique_ptr<TierWindows>& w = tiers_[{model, tier}];
  if (!w) w = std::make_unique<TierWindows>(control_window_s_);
  w->ttft.Observe(m.ttft_s, now_s);
  if (has_tpot) w->tpot.Observe(tpot_s, now_s);
  w->recent.push_back({now_s, m.ttft_s, has_tpot ? tpot_s : kNaN});
  if (w->recent.size() > static_cast<size_t>(kRecent)) w->recent.pop_front();
}

TierLatency SloTracker::RecentTier(const std::string& model, const std::string& tier, int32_t n, double since_s) const {
  TierLatency t;
  t.p99_ttft_s = t.p99_tpot_s = kNaN;
  std::vector<double> ttft, tpot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tiers_.find({model, tier});
    if (it == tiers_.end()) return t;
    const auto& r = it->second->recent;
    for (auto e = r.rbegin(); e != r.rend() && static_cast<int32_t>(ttft.size()) < n && e->time_s >= since_s; ++e) {
      ttft.push_back(e->ttft_s);
      if (!std::isnan(e->tpot_s)) tpot.push_back(e->tpot_s);
    }
  }
  auto p99 = [](std::vector<double>& v) {
    if (v.empty()) return kNaN;
    std::sort(v.begin(), v.end());
    const size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(v.size())));
    return v[std::max<size_t>(rank, 1) - 1];
  };
  t.samples = static_cast<int64_t>(ttft.size());
  t.tpot_samples = static_cast<int64_t>(tpot.size());
  t.p99_ttft_s = p99(ttft);
  t.p99_tpot_s = p99(tpot);
  return t;
}

std::function<void(const engine::RequestMetrics&, engine::FinishReason, double)> SloTracker::HookFor(
    std::string model) {
  return [this, model = std::move(model)](const engine::RequestMetrics& m, engine::FinishReason r, double now) {
    Observe(model, m, r, now);
  };
}

std::map<metrics::BucketId, BucketSlo> SloTracker::Buckets(const std::string& model, double now_s) const {
  std::map<metrics::BucketId, BucketSlo> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = buckets_.lower_bound({model, INT32_MIN}); it != buckets_.end() && it->first.first == model; ++it)
    out[it->first.second] = {it->second.Window(now_s), it->second.total, Read(*it->second.ttft, now_s),
                             Read(*it->second.tpot, now_s), Read(*it->second.e2e, now_s), Read(*it->second.queue, now_s)};
  return out;
}

TierLatency SloTracker::Tier(const std::string& model, const std::string& tier, double now_s) const {
  TierLatency t;
  t.p99_ttft_s = t.p99_tpot_s = kNaN;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tiers_.find({model, tier});
  if (it == tiers_.end()) return t;
  static const double kQ[] = {0.99};
  const metrics::WindowQuantiles::Summary ttft = it->second->ttft.Read(kQ, now_s);
  const metrics::WindowQuantiles::Summary tpot = it->second->tpot.Read(kQ, now_s);
  t.samples = static_cast<int64_t>(ttft.count);
  t.tpot_samples = static_cast<int64_t>(tpot.count);
  t.p99_ttft_s = ttft.quantiles[0];
  t.p99_tpot_s = tpot.quantiles[0];
  return t;
}

std::vector<std::string> SloTracker::Models() const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, ring] : buckets_)
    if (out.empty() || out.back() != key.first) out.push_back(key.first);
  return out;
}

}  // namespace tarmac::control

namespace tarmac::control {

Status SloTracker::CheckIntegrity(double now_s) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, ring] : buckets_) {
    const SloCounts w = ring.Window(now_s), &t = ring.total;
    for (const SloCounts* c : {&w, &t}) {
      if (c->judged > c->requests || c->met > c->judged || c->ttft_met > c->judged || c->tpot_met > c->tpot_judged ||
          c->tpot_judged > c->judged || c->cancelled + c->errors > c->requests)
        return Internal("model {} bucket {}: inconsistent counts ({} requests, {} judged, {} met)", key.first, key.second,
                        c->requests, c->judged, c->met);
    }
    if (w.requests > t.requests || w.met > t.met || w.output_tokens > t.output_tokens)
      return Internal("model {} bucket {}: the window holds more than since start", key.first, key.second);
  }
  return Status::Ok();
}

}  // namespace tarmac::control
