#include "control/slo_report.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tarmac::control {
namespace {

using Json = nlohmann::ordered_json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The registry's families a report reads, collected once.
struct Families {
  std::map<std::string, metrics::FamilySnapshot> by_name;
  const metrics::FamilySnapshot& operator[](const std::string& name) const {
    static const metrics::FamilySnapshot kEmpty;
    auto it = by_name.find(name);
    return it == by_name.end() ? kEmpty : it->second;
  }
};

double Value(const metrics::FamilySnapshot& f, const metrics::LabelValues& labels) {
  const metrics::SeriesSnapshot* s = f.Find(labels);
  return s ? s->value : 0.0;
}

LatencyQuantiles FromWindow(const metrics::FamilySnapshot& f, const metrics::LabelValues& labels) {
  LatencyQuantiles q;
  q.p50 = q.p95 = q.p99 = kNaN;
  const metrics::SeriesSnapshot* s = f.Find(labels);
  if (s == nullptr || s->window.quantiles.size() != 3) return q;
  q.count = static_cast<int64_t>(s->window.count);
  q.p50 = s->window.quantiles[0] * 1e3;
  q.p95 = s->window.quantiles[1] * 1e3;
  q.p99 = s->window.quantiles[2] * 1e3;
  return q;
}

LatencyQuantiles FromHistogram(const metrics::FamilySnapshot& f, const metrics::LabelValues& labels) {
  LatencyQuantiles q;
  q.p50 = q.p95 = q.p99 = kNaN;
  const metrics::SeriesSnapshot* s = f.Find(labels);
  if (s == nullptr) return q;
  q.count = static_cast<int64_t>(s->histogram.count);
  q.p50 = HistogramQuantile(s->histogram, 0.50) * 1e3;
  q.p95 = HistogramQuantile(s->histogram, 0.95) * 1e3;
  q.p99 = HistogramQuantile(s->histogram, 0.99) * 1e3;
  return q;
}

// JSON null for NaN (JSON has no NaN).
Json Num(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

Json QuantilesJson(const LatencyQuantiles& q) {
  return {{"count", q.count}, {"p50", Num(q.p50)}, {"p95", Num(q.p95)}, {"p99", Num(q.p99)}};
}

double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : kNaN; }

Json SpanJson(const SpanReport& s) {
  const SloCounts& c = s.counts;
  return {{"requests", s.requests},
          {"errors", c.errors},
          {"cancelled", c.cancelled},
          {"ttft_ms", QuantilesJson(s.ttft_ms)},
          {"tpot_ms", QuantilesJson(s.tpot_ms)},
          {"e2e_ms", QuantilesJson(s.e2e_ms)},
          {"queue_ms", QuantilesJson(s.queue_ms)},
          {"output_tokens", c.output_tokens},
          {"output_tokens_per_s", s.output_tokens_per_s},
          {"slo_judged", c.judged},
          {"slo_attainment", Num(c.attainment())},
          {"ttft_attainment", Num(Ratio(c.ttft_met, c.judged))},
          {"tpot_attainment", Num(Ratio(c.tpot_met, c.tpot_judged))},
          {"prompt_tokens", c.prompt_tokens},
          {"cached_prompt_tokens", c.cached_prompt_tokens},
          {"prefix_hit_rate", Num(Ratio(c.cached_prompt_tokens, c.prompt_tokens))}};
}

std::string KeyOf(const std::map<metrics::BucketId, std::string>& keys, metrics::BucketId b) {
  auto it = keys.find(b);
  return it == keys.end() ? std::to_string(b) : it->second;
}

Json KnobsJson(const engine::EngineKnobs& k, const std::map<metrics::BucketId, std::string>& keys) {
  Json caps = Json::object();
  for (const auto& [b, cap] : k.bucket_max_k) caps[KeyOf(keys, b)] = cap;
  auto limit = [](int32_t v) { return v == INT32_MAX ? Json(nullptr) : Json(v); };
  return {{"max_batched_tokens", k.max_batched_tokens}, {"max_running", k.max_running},
          {"speculation", k.speculation}, {"spec_max_k", k.spec_max_k}, {"bucket_max_k", caps},
          {"admit_max_priority", limit(k.admit_max_priority)}, {"max_cached_blocks", limit(k.max_cached_blocks)},
          {"preempt_above_priority", limit(k.preempt_above_priority)}};
}

Json ControllerJson(const ControllerView& v, double now_s, double uptime_s, const std::map<metrics::BucketId, std::string>& keys) {
  Json measures = Json::object();
  for (const auto& [m, reason] : v.plan.measures) measures[MeasureName(m)] = reason;
  Json caps = Json::array();
  for (const auto& [b, cap] : v.plan.k_caps)
    caps.push_back({{"bucket", KeyOf(keys, b)}, {"k", cap.k}, {"reason", cap.reason},
                    {"acceptance", cap.acceptance}, {"for_s", now_s - cap.since_s}});
  Json counts = Json::array();
  for (const auto& [key, n] : v.action_counts) counts.push_back({{"action", key.first}, {"reason", key.second}, {"count", n}});
  Json recent = Json::array();
  for (const ActionRecord& a : v.recent)
    recent.push_back({{"ago_s", now_s - a.time_s}, {"action", a.action}, {"reason", a.reason}, {"detail", a.detail},
                      {"state", LevelName(a.level)}});
  return {{"state", LevelName(v.level)},
          {"state_for_s", v.level_since_s > 0 ? now_s - v.level_since_s : uptime_s},
          {"measures", measures},
          {"k_caps", caps},
          {"knobs", KnobsJson(v.knobs, keys)},
          {"lowest_tiers", {{"shed", v.lowest_tiers.shed}, {"retry_after_s", v.lowest_tiers.retry_after_s},
                            {"min_priority", v.lowest_tiers.min_priority == INT32_MIN ? Json(nullptr) : Json(v.lowest_tiers.min_priority)},
                            {"max_tokens_cap", v.lowest_tiers.max_tokens_cap ? Json(v.lowest_tiers.max_tokens_cap) : Json(nullptr)}}},
          {"actions_total", counts},
          {"recent_actions", recent}};
}

void Count(RouteCounts* c, const std::string& outcome, int64_t n) {
  if (outcome == "served") c->served += n;
  else if (outcome == "escalated") c->escalated += n;
  else if (outcome == "fallback") c->fallback += n;
  else c->errors += n;
}

// tarmac:route_requests_total{route, model_name, outcome, <bucket labels>}: each series' route,
// answering model, outcome, bucket and count.
struct RoutedSeries {
  std::string route, model, outcome;
  metrics::BucketId bucket = metrics::kNoBucket;
  int64_t n = 0;
};
std::vector<RoutedSeries> Routed(const Families& f, const std::map<std::vector<std::string>, metrics::BucketId>& ids) {
  std::vector<RoutedSeries> out;
  for (const metrics::SeriesSnapshot& s : f["tarmac:route_requests_total"].series) {
    if (s.labels.size() < 3) continue;
    RoutedSeries r{s.labels[0], s.labels[1], s.labels[2], metrics::kNoBucket, static_cast<int64_t>(s.value)};
    auto it = ids.find(std::vector<std::string>(s.labels.begin() + 3, s.labels.end()));
    if (it != ids.end()) r.bucket = it->second;
    out.push_back(std::move(r));
  }
  return out;
}

Json RouteCountsJson(const RouteCounts& c) {
  return {{"requests", c.total()}, {"served", c.served}, {"escalated", c.escalated}, {"fallback", c.fallback},
          {"errors", c.errors}, {"escalation_rate", Num(Ratio(c.escalated, c.total()))},
          {"fallback_rate", Num(Ratio(c.fallback, c.total()))}};
}

Json RouteSpanJson(const RouteReport::Span& s) {
  Json j = RouteCountsJson(s.counts);
  Json shares = Json::object();
  for (const auto& [m, n] : s.by_model) shares[m] = Num(Ratio(n, s.counts.total()));
  j["model_share"] = shares;
  return j;
}

// Every model with an engine in the registry.
std::vector<std::string> ModelNames(const Families& f) {
  std::vector<std::string> out;
  for (const metrics::SeriesSnapshot& s : f["tarmac:engine_steps_total"].series) out.push_back(s.labels.at(0));
  return out;
}

// The buckets with a series for `model` in the per-bucket families, or in the tracker.
std::vector<metrics::BucketId> BucketsOf(const std::string& model, const Families& f, const metrics::BucketTable& table,
                                         const std::map<metrics::BucketId, BucketSlo>& tracked) {
  std::map<std::vector<std::string>, metrics::BucketId> ids;
  for (metrics::BucketId b = 0; b < table.size(); ++b) ids[table.LabelValues(b)] = b;
  std::vector<metrics::BucketId> out;
  for (const RoutedSeries& r : Routed(f, ids))
    if (r.model == model && r.bucket != metrics::kNoBucket) out.push_back(r.bucket);
  for (const auto& [b, v] : tracked) out.push_back(b);
  for (const char* name : {"tarmac:e2e_request_latency_seconds", "tarmac:spec_decode_decisions_total",
                           "tarmac:spec_decode_num_draft_tokens_total"}) {
    for (const metrics::SeriesSnapshot& s : f[name].series) {
      if (s.labels.empty() || s.labels[0] != model) continue;
      auto it = ids.find(std::vector<std::string>(s.labels.begin() + 1, s.labels.end()));
      if (it != ids.end()) out.push_back(it->second);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

BucketReport Bucket(const std::string& model, metrics::BucketId b, const Families& f, const metrics::BucketTable& table,
                    const SloTargets& targets, const std::map<metrics::BucketId, BucketSlo>& tracked,
                    const std::vector<RoutedSeries>& routed, double window_s, double uptime_s) {
  BucketReport r;
  r.id = b;
  r.key = table.Key(b);
  metrics::LabelValues labels = {model};
  for (size_t i = 0; i < metrics::BucketTable::LabelNames().size(); ++i) {
    r.labels.emplace_back(metrics::BucketTable::LabelNames()[i], table.LabelValues(b)[i]);
    labels.push_back(table.LabelValues(b)[i]);
  }
  if (const TierSlo* t = targets.Find(table.Get(b).sla)) r.slo = *t;
  r.window.ttft_ms = FromWindow(f["tarmac:window_time_to_first_token_seconds"], labels);
  r.window.tpot_ms = FromWindow(f["tarmac:window_time_per_output_token_seconds"], labels);
  r.window.e2e_ms = FromWindow(f["tarmac:window_e2e_request_latency_seconds"], labels);
  r.window.queue_ms = FromWindow(f["tarmac:window_request_queue_time_seconds"], labels);
  r.total.ttft_ms = FromHistogram(f["tarmac:time_to_first_token_seconds"], labels);
  r.total.tpot_ms = FromHistogram(f["tarmac:time_per_output_token_seconds"], labels);
  r.total.e2e_ms = FromHistogram(f["tarmac:e2e_request_latency_seconds"], labels);
  r.total.queue_ms = FromHistogram(f["tarmac:request_queue_time_seconds"], labels);
  r.window.requests = r.window.e2e_ms.count;
  r.total.requests = r.total.e2e_ms.count;
  if (auto it = tracked.find(b); it != tracked.end()) {
    r.window.counts = it->second.window;
    r.total.counts = it->second.total;
    r.total.ttft_ms = it->second.ttft_ms;
    r.total.tpot_ms = it->second.tpot_ms;
    r.total.e2e_ms = it->second.e2e_ms;
    r.total.queue_ms = it->second.queue_ms;
    r.window.requests = it->second.window.requests;
    r.total.requests = it->second.total.requests;
  }
  // Over the span's length (a run shorter than the window is its own length).
  r.window.output_tokens_per_s = r.window.counts.output_tokens / std::max(1e-3, std::min(window_s, uptime_s));
  r.total.output_tokens_per_s = r.total.counts.output_tokens / std::max(1e-3, uptime_s);
  r.draft_tokens = static_cast<int64_t>(Value(f["tarmac:spec_decode_num_draft_tokens_total"], labels));
  r.accepted_tokens = static_cast<int64_t>(Value(f["tarmac:spec_decode_num_accepted_tokens_total"], labels));
  r.spec_decisions = static_cast<int64_t>(Value(f["tarmac:spec_decode_decisions_total"], labels));
  r.spec_fallbacks = static_cast<int64_t>(Value(f["tarmac:spec_decode_fallbacks_total"], labels));
  for (const RoutedSeries& s : routed)
    if (s.model == model && s.bucket == b) Count(&r.routed, s.outcome, s.n);
  return r;
}

}  // namespace

double HistogramQuantile(const metrics::Histogram::Snapshot& h, double q) {
  if (h.count == 0 || h.cumulative.empty()) return kNaN;
  const double rank = q * static_cast<double>(h.count);
  for (size_t i = 0; i < h.cumulative.size(); ++i) {
    if (static_cast<double>(h.cumulative[i]) < rank || h.cumulative[i] == 0) continue;
    if (i >= h.bounds.size()) return h.bounds.empty() ? kNaN : h.bounds.back();  // in +Inf
    const double lo = i == 0 ? 0.0 : h.bounds[i - 1], hi = h.bounds[i];
    const double below = i == 0 ? 0.0 : static_cast<double>(h.cumulative[i - 1]);
    const double in = static_cast<double>(h.cumulative[i]) - below;
    return in > 0 ? lo + (hi - lo) * (rank - below) / in : hi;
  }
  return h.bounds.empty() ? kNaN : h.bounds.back();
}

SloReport BuildSloReport(const metrics::Registry& registry, const SloTracker* tracker, const Controller* controller,
                         double now_s, bool tracked_only) {
  SloReport r;
  r.now_s = now_s;
  if (tracker) {
    r.targets = tracker->targets();
    r.window_s = tracker->report_window_s();
    r.control_window_s = tracker->control_window_s();
    r.uptime_s = now_s - tracker->start_s();
  }
  r.controller_enabled = controller != nullptr;
  if (controller) r.controller_config = controller->config();
  Families f;
  for (metrics::FamilySnapshot& s : registry.Collect(now_s)) f.by_name[s.name] = std::move(s);
  const metrics::BucketTable& table = registry.buckets();
  for (metrics::BucketId b = 0; b < table.size(); ++b) r.bucket_keys[b] = table.Key(b);
  std::map<std::vector<std::string>, metrics::BucketId> ids;
  for (metrics::BucketId b = 0; b < table.size(); ++b) ids[table.LabelValues(b)] = b;
  const std::vector<RoutedSeries> routed = Routed(f, ids);
  for (const RoutedSeries& s : routed) {
    auto it = std::find_if(r.routes.begin(), r.routes.end(), [&](const RouteReport& x) { return x.name == s.route; });
    if (it == r.routes.end()) {
      r.routes.push_back({s.route, {}, {}});
      it = r.routes.end() - 1;
    }
    Count(&it->all.counts, s.outcome, s.n);
    it->all.by_model[s.model] += s.n;
    RouteReport::Span& bs = it->buckets[s.bucket == metrics::kNoBucket ? std::string("(unknown)") : table.Key(s.bucket)];
    Count(&bs.counts, s.outcome, s.n);
    bs.by_model[s.model] += s.n;
  }
  int64_t all_window = 0;
  for (const std::string& name : ModelNames(f)) {
    ModelReport m;
    m.name = name;
    const metrics::LabelValues ml = {name};
    m.kv_usage = Value(f["tarmac:kv_cache_usage_perc"], ml);
    m.running = static_cast<int64_t>(Value(f["tarmac:num_requests_running"], ml));
    m.waiting = static_cast<int64_t>(Value(f["tarmac:num_requests_waiting"], ml));
    m.preemptions = static_cast<int64_t>(Value(f["tarmac:num_preemptions_total"], ml));
    m.prefix_queried_tokens = Value(f["tarmac:prefix_cache_queries_total"], ml);
    m.prefix_hit_tokens = Value(f["tarmac:prefix_cache_hits_total"], ml);
    m.draft_seconds = Value(f["tarmac:spec_decode_draft_seconds_total"], ml);
    m.verify_seconds = Value(f["tarmac:spec_decode_verify_seconds_total"], ml);
    const std::map<metrics::BucketId, BucketSlo> tracked =
        tracker ? tracker->Buckets(name, now_s) : std::map<metrics::BucketId, BucketSlo>{};
    if (tracker)
      for (const TierSlo& t : r.targets.tiers()) m.tiers.emplace_back(t.name, tracker->Tier(name, t.name, now_s));
    for (metrics::BucketId b : BucketsOf(name, f, table, tracked)) {
      if (tracked_only && tracked.count(b) == 0) continue;
      m.buckets.push_back(Bucket(name, b, f, table, r.targets, tracked, routed, r.window_s, r.uptime_s));
      all_window += m.buckets.back().window.requests;
      const RouteCounts& c = m.buckets.back().routed;
      m.routed.served += c.served;
      m.routed.escalated += c.escalated;
      m.routed.fallback += c.fallback;
      m.routed.errors += c.errors;
    }
    if (controller) {
      const std::vector<std::string> names = controller->Models();
      if (std::find(names.begin(), names.end(), name) != names.end()) m.controller = controller->View(name);
    }
    r.models.push_back(std::move(m));
  }
  for (ModelReport& m : r.models) {
    int64_t mine = 0;
    for (const BucketReport& b : m.buckets) mine += b.window.requests;
    m.route_share = all_window > 0 ? static_cast<double>(mine) / all_window : kNaN;
  }
  return r;
}

nlohmann::ordered_json ToJson(const SloReport& r) {
  Json tiers = Json::array();
  for (const TierSlo& t : r.targets.tiers())
    tiers.push_back({{"name", t.name}, {"rank", r.targets.Rank(t.name)}, {"ttft_ms", t.ttft_ms},
                     {"tpot_ms", t.tpot_ms}, {"lowest", r.targets.IsLowest(t.name)}});
  Json ctl = {{"enabled", r.controller_enabled}};
  if (r.controller_enabled) {
    ctl["interval_s"] = r.controller_config.interval_s;
    ctl["window_s"] = r.controller_config.window_s;
  }
  Json models = Json::array();
  for (const ModelReport& m : r.models) {
    Json buckets = Json::array();
    int64_t drafted = 0, accepted = 0;
    for (const BucketReport& b : m.buckets) {
      Json labels = Json::object();
      for (const auto& [k, v] : b.labels) labels[k] = v;
      drafted += b.draft_tokens;
      accepted += b.accepted_tokens;
      buckets.push_back(
          {{"key", b.key},
           {"labels", labels},
           {"slo", b.slo ? Json{{"tier", b.slo->name}, {"ttft_ms", b.slo->ttft_ms}, {"tpot_ms", b.slo->tpot_ms}} : Json(nullptr)},
           {"window", SpanJson(b.window)},
           {"total", SpanJson(b.total)},
           {"speculation",
            {{"draft_tokens", b.draft_tokens}, {"accepted_tokens", b.accepted_tokens},
             {"rejected_tokens", b.draft_tokens - b.accepted_tokens},
             {"acceptance_rate", Num(Ratio(b.accepted_tokens, b.draft_tokens))}, {"decisions", b.spec_decisions},
             {"fallbacks", b.spec_fallbacks}, {"fallback_rate", Num(Ratio(b.spec_fallbacks, b.spec_decisions))}}},
           {"routed", RouteCountsJson(b.routed)}});
    }
    Json tiers = Json::array();
    for (const auto& [tier, lat] : m.tiers) {
      const TierSlo* t = r.targets.Find(tier);
      tiers.push_back({{"tier", tier}, {"samples", lat.samples}, {"tpot_samples", lat.tpot_samples},
                       {"p99_ttft_ms", Num(lat.p99_ttft_s * 1e3)}, {"p99_tpot_ms", Num(lat.p99_tpot_s * 1e3)},
                       {"ttft_target_ms", t ? Json(t->ttft_ms) : Json(nullptr)},
                       {"tpot_target_ms", t ? Json(t->tpot_ms) : Json(nullptr)}});
    }
    models.push_back(
        {{"model", m.name},
         {"kv_cache_usage", m.kv_usage},
         {"requests_running", m.running},
         {"requests_waiting", m.waiting},
         {"preemptions", m.preemptions},
         {"prefix_cache",
          {{"queried_tokens", m.prefix_queried_tokens}, {"hit_tokens", m.prefix_hit_tokens},
           {"prefill_tokens_saved", m.prefix_hit_tokens},
           {"hit_rate", Num(m.prefix_queried_tokens > 0 ? m.prefix_hit_tokens / m.prefix_queried_tokens : kNaN)}}},
         {"speculation",
          {{"draft_seconds", m.draft_seconds}, {"verify_seconds", m.verify_seconds}, {"draft_tokens", drafted},
           {"accepted_tokens", accepted}, {"acceptance_rate", Num(Ratio(accepted, drafted))}}},
         {"route", [&] {
            Json j = RouteCountsJson(m.routed);
            j["share"] = Num(m.route_share);
            return j;
          }()},
         {"control_window_tiers", tiers},
         {"controller", m.controller ? ControllerJson(*m.controller, r.now_s, r.uptime_s, r.bucket_keys) : Json(nullptr)},
         {"buckets", buckets}});
  }
  Json routes = Json::array();
  for (const RouteReport& rr : r.routes) {
    Json j = RouteSpanJson(rr.all);
    j["route"] = rr.name;
    Json bs = Json::array();
    for (const auto& [key, span] : rr.buckets) {
      Json b = RouteSpanJson(span);
      b["key"] = key;
      bs.push_back(std::move(b));
    }
    j["buckets"] = std::move(bs);
    routes.push_back(std::move(j));
  }
  return {{"object", "slo_report"}, {"window_s", r.window_s}, {"control_window_s", r.control_window_s}, {"uptime_s", r.uptime_s},
          {"tiers", tiers},         {"controller", ctl},      {"models", models},
          {"routes", routes}};
}

}  // namespace tarmac::control
