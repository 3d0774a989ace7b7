#include "control/controller.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/check.h"
#include "base/clock.h"
#include "base/log.h"

namespace tarmac::control {
namespace {

constexpr size_t kRecentActions = 64;

// Counts of `now` minus those of `then` (buckets absent then count from zero).
engine::SpecCounts Minus(const engine::SpecCounts& now, const engine::SpecCounts* then) {
  engine::SpecCounts d = now;
  if (then == nullptr) return d;
  d.drafts -= then->drafts;
  d.draft_tokens -= then->draft_tokens;
  d.accepted_tokens -= then->accepted_tokens;
  d.decisions -= then->decisions;
  d.fallbacks -= then->fallbacks;
  return d;
}

}  // namespace

Controller::Controller(ControllerConfig config, std::shared_ptr<SloTracker> tracker,
                       std::shared_ptr<metrics::Registry> registry)
    : config_(std::move(config)), tracker_(std::move(tracker)), registry_(std::move(registry)) {
  TARMAC_CHECK(config_.Validate().ok());
  TARMAC_CHECK(tracker_ != nullptr && registry_ != nullptr);
  actions_ = &registry_->Counters("tarmac:controller_actions_total",
                                  "Degradation controller actions by action and reason.",
                                  {"model_name", "action", "reason"});
}

Controller::~Controller() { Stop(); }

void Controller::AddModel(const std::string& name, engine::EngineClient* engine) {
  TARMAC_CHECK(engine != nullptr && !thread_.joinable());
  for (const auto& m : models_) TARMAC_CHECK(m->name != name);
  auto m = std::make_unique<Model>(config_);
  m->name = name;
  m->engine = engine;
  m->baseline = m->applied = m->shown_knobs = engine->knobs();
  const std::atomic<int>* level = &m->level;
  m->level_gauge = registry_->Gauges("tarmac:controller_level", "Degradation level: 0 normal, 1 pressured, 2 degraded, 3 shedding.",
                                     {"model_name"})
                       .Callback({name}, [level] { return static_cast<double>(level->load()); });
  models_.push_back(std::move(m));
}

void Controller::SetRouteDegrader(RouteDegrader* d) {
  TARMAC_CHECK(!thread_.joinable());
  degrader_ = d;
}

void Controller::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void Controller::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Controller::Loop() {
  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(config_.interval_s));
  auto next = std::chrono::steady_clock::now() + period;
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_cv_.wait_until(lock, next, [this] { return stop_; })) {
    lock.unlock();
    Tick(NowSeconds());
    lock.lock();
    next += period;
    next = std::max(next, std::chrono::steady_clock::now());  // never a burst of late ticks
  }
}

ModelSignals Controller::Signals(Model& m, double now_s) {
  ModelSignals s;
  s.now_s = now_s;
  const SloTargets& targets = tracker_->targets();
  for (const TierSlo& t : targets.tiers()) {
    TierLatency lat = tracker_->Tier(m.name, t.name, now_s);
    if (lat.samples < config_.min_samples) {
      const TierLatency recent = tracker_->RecentTier(m.name, t.name, config_.min_samples,
                                                      now_s - config_.sparse_lookback_windows * config_.window_s);
      if (recent.samples >= config_.min_samples) lat = recent;
    }
    TierSignal sig{t.name, targets.Rank(t.name) < targets.LowestRank(), t.ttft_ms / 1e3, t.tpot_ms / 1e3,
                   lat.samples, lat.tpot_samples, lat.p99_ttft_s, lat.p99_tpot_s};
    // The evidence for a further rise: what ended after the last change (and in the window).
    const TierLatency after = tracker_->RecentTier(m.name, t.name, SloTracker::kRecent,
                                                   std::max(m.machine.level_since_s(), now_s - config_.window_s));
    sig.samples_after = after.samples;
    sig.tpot_samples_after = after.tpot_samples;
    sig.p99_ttft_after_s = after.p99_ttft_s;
    sig.p99_tpot_after_s = after.p99_tpot_s;
    s.tiers.push_back(std::move(sig));
  }
  s.kv_usage = m.engine->Stats().kv_usage();
  // Draft acceptance over the window: the engine's cumulative counts minus the oldest
  // snapshot still inside it.
  std::map<metrics::BucketId, engine::SpecCounts> spec = m.engine->metrics().SpecByBucket();
  auto& hist = m.spec_history;
  while (!hist.empty() && hist.front().first < now_s - config_.window_s) hist.pop_front();
  for (const auto& [b, c] : spec) {
    const engine::SpecCounts* then = nullptr;
    if (!hist.empty()) {
      auto it = hist.front().second.find(b);
      if (it != hist.front().second.end()) then = &it->second;
    }
    const engine::SpecCounts d = Minus(c, then);
    s.spec.push_back({b, d.draft_tokens, d.accepted_tokens});
  }
  hist.emplace_back(now_s, std::move(spec));
  s.spec_max_k = m.baseline.speculation ? m.baseline.spec_max_k : 0;
  s.can_route_smaller = degrader_ != nullptr && degrader_->CanRouteSmaller(m.name);
  return s;
}

engine::EngineKnobs Controller::KnobsFor(const Model& m, const ControlPlan& p) const {
  engine::EngineKnobs k = m.baseline;
  if (p.Has(Measure::kCapBatchedTokens)) {
    // Shorter prefill chunks, decodes first; never below one token per running request.
    const int32_t cap = static_cast<int32_t>(std::ceil(m.baseline.max_batched_tokens * config_.batched_tokens_fraction));
    k.max_batched_tokens = std::min(m.baseline.max_batched_tokens,
                                    std::max({config_.min_batched_tokens, cap, m.baseline.max_running}));
  }
  if (p.Has(Measure::kSpeculationOff)) k.speculation = false;
  for (const auto& [b, cap] : p.k_caps) {
    auto it = k.bucket_max_k.find(b);
    k.bucket_max_k[b] = it == k.bucket_max_k.end() ? cap.k : std::min(it->second, cap.k);
  }
  if (p.Has(Measure::kHoldLowPriority) || p.Has(Measure::kPreemptLowPriority)) k.admit_max_priority = std::min(k.admit_max_priority, 0);
  if (p.Has(Measure::kEvictCached)) k.max_cached_blocks = 0;
  if (p.Has(Measure::kPreemptLowPriority)) k.preempt_above_priority = std::min(k.preempt_above_priority, 0);
  return k;
}

void Controller::Apply(Model& m, const ControlPlan& p, const std::vector<Transition>& changes, double now_s) {
  const engine::EngineKnobs k = KnobsFor(m, p);
  if (!(k == m.applied)) {
    if (Status st = m.engine->SetKnobs(k); st.ok()) {
      m.applied = k;
    } else {
      TLOG_WARN("controller: {}: the engine refused the knobs: {}", m.name, st.message());
    }
  }
  const bool route = p.Has(Measure::kRouteSmaller);
  if (degrader_ != nullptr && route != m.routed_smaller) {
    degrader_->SetRouteSmaller(m.name, route);
    m.routed_smaller = route;
  }
  AdmitDecision lowest;
  if (p.Has(Measure::kShedLowestTier)) {
    lowest.shed = true;
    lowest.reason = p.measures.at(Measure::kShedLowestTier);
    // Long enough for the level to fall once, at least a second.
    lowest.retry_after_s = std::max(1, static_cast<int32_t>(std::ceil(config_.down_ticks * config_.interval_s)));
  }
  if (p.Has(Measure::kDeprioritizeLowestTier)) {
    lowest.min_priority = 1;  // the low class: scheduled after, preempted before class 0
    if (lowest.reason.empty()) lowest.reason = p.measures.at(Measure::kDeprioritizeLowestTier);
  }
  if (p.Has(Measure::kCapMaxTokens)) {
    lowest.max_tokens_cap = config_.max_tokens_cap;
    if (lowest.reason.empty()) lowest.reason = p.measures.at(Measure::kCapMaxTokens);
  }
  m.level.store(static_cast<int>(p.level));
  std::lock_guard<std::mutex> lock(mu_);
  m.lowest = lowest;
  m.shown_plan = p;
  m.shown_knobs = m.applied;
  m.level_since_s = m.machine.level_since_s();
  for (Transition t : changes) {
    if (t.bucket != metrics::kNoBucket)
      t.detail = "bucket '" + registry_->buckets().Key(t.bucket) + "'" + (t.detail.empty() ? "" : ": " + t.detail);
    TLOG_INFO("controller: {}: {} (reason {}){}{}", m.name, t.action, t.reason, t.detail.empty() ? "" : ": ", t.detail);
    actions_->With({m.name, t.action, t.reason}).Add();
    ++m.counts[{t.action, t.reason}];
    m.recent.push_back({now_s, t.action, t.reason, t.detail, p.level});
    if (m.recent.size() > kRecentActions) m.recent.pop_front();
  }
}

void Controller::Tick(double now_s) {
  for (const auto& m : models_) {
    std::vector<Transition> changes;
    const ModelSignals s = Signals(*m, now_s);
    const ControlPlan& p = m->machine.Update(s, &changes);
    Apply(*m, p, changes, now_s);
  }
}

AdmitDecision Controller::Admit(const std::string& model, std::string_view tier) const {
  if (!tracker_->targets().IsLowest(tier)) return {};
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& m : models_)
    if (m->name == model) return m->lowest;
  return {};
}

ControllerView Controller::View(const std::string& model) const {
  ControllerView v;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& m : models_) {
    if (m->name != model) continue;
    v.level = m->shown_plan.level;
    v.level_since_s = m->level_since_s;
    v.plan = m->shown_plan;
    v.knobs = m->shown_knobs;
    v.lowest_tiers = m->lowest;
    v.recent.assign(m->recent.begin(), m->recent.end());
    v.action_counts = m->counts;
  }
  return v;
}

std::vector<std::string> Controller::Models() const {
  std::vector<std::string> out;
  for (const auto& m : models_) out.push_back(m->name);
  return out;
}

}  // namespace tarmac::control
