// SloReport: the per-model, per-request-bucket SLO report behind `GET /v1/slo`, `tarmac report`
// and the benchmarks' per-bucket tables. Built from what is already measured: the registry's
// series (window summaries over the last 60 s, since-start histograms, speculation, KV and
// prefix-cache counts), the SloTracker (attainment, tokens, prefix savings per bucket) and the
// Controller's view (state, measures, knobs, actions). Rendered as JSON (ToJson; the schema
// is README's), which is also what the terminal table (slo_table.h) reads.
//
// Window quantiles are the registry's window summaries (exact, nearest rank, until a slice
// overflows: metrics/window_quantiles.h). Since-start quantiles are the tracker's samples;
// without a tracker they are estimated from the histograms' buckets (linear within a bucket,
// as Prometheus' histogram_quantile does), which only bounds them by the bucket edges.
//
// Plain values. BuildSloReport reads the registry (callback series run on the caller's
// thread: call it where /metrics renders, the server's I/O thread) and the tracker and
// controller (thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/controller.h"
#include "control/slo_targets.h"
#include "control/slo_tracker.h"
#include "metrics/registry.h"

namespace tarmac::control {

struct SpanReport {
  LatencyQuantiles ttft_ms, tpot_ms, e2e_ms, queue_ms;
  SloCounts counts;              // from the tracker (zeros without one)
  int64_t requests = 0;          // ended in the span
  double output_tokens_per_s = 0;
};

// Routed requests (tarmac:route_requests_total, since start) that a model answered, by how the
// route ended: served by the model it chose, escalated to it by a cascade, fallen back to it.
struct RouteCounts {
  int64_t served = 0, escalated = 0, fallback = 0, errors = 0;
  int64_t total() const { return served + escalated + fallback + errors; }
};

struct BucketReport {
  metrics::BucketId id = metrics::kNoBucket;
  std::string key;                                         // BucketTable::Key
  std::vector<std::pair<std::string, std::string>> labels;  // LabelNames order
  std::optional<TierSlo> slo;                              // the tier's targets
  SpanReport window, total;
  int64_t draft_tokens = 0, accepted_tokens = 0, spec_decisions = 0, spec_fallbacks = 0;
  RouteCounts routed;  // routed requests of this bucket that this model answered
};

struct ModelReport {
  std::string name;
  double kv_usage = 0;
  int64_t running = 0, waiting = 0, preemptions = 0;
  double prefix_queried_tokens = 0, prefix_hit_tokens = 0;
  double draft_seconds = 0, verify_seconds = 0;
  double route_share = 0;  // this model's share of the window's requests (all models)
  RouteCounts routed;      // its buckets' routed counts summed
  // Per tier with targets (in the targets' order): p99 TTFT / TPOT over the control window,
  // what the controller (when on) judges; empty without a tracker.
  std::vector<std::pair<std::string, TierLatency>> tiers;
  std::optional<ControllerView> controller;
  std::vector<BucketReport> buckets;
};

// One route's requests (since start), by bucket: how many, which model answered, the
// escalation rate (cascade escalations / requests) and the fallback rate.
struct RouteReport {
  struct Span {
    RouteCounts counts;
    std::map<std::string, int64_t> by_model;  // answering model -> requests
  };
  std::string name;
  Span all;
  std::map<std::string, Span> buckets;  // by bucket key
};

struct SloReport {
  double now_s = 0, window_s = 60, uptime_s = 0;
  double control_window_s = 10;  // of the models' control_window_tiers
  SloTargets targets;
  bool controller_enabled = false;
  ControllerConfig controller_config;
  std::vector<ModelReport> models;
  std::vector<RouteReport> routes;  // empty when nothing is routed
  std::map<metrics::BucketId, std::string> bucket_keys;  // every interned bucket's key
};

// tracker and controller may be null (no attainment; controller off). tracked_only: only the
// buckets the tracker has seen (a benchmark's measured requests, not its warm-up).
SloReport BuildSloReport(const metrics::Registry& registry, const SloTracker* tracker, const Controller* controller,
                         double now_s, bool tracked_only = false);
nlohmann::ordered_json ToJson(const SloReport& r);

// The q-quantile of a histogram snapshot (linear within the bucket it falls in; the largest
// finite bound when it falls in +Inf). NaN when empty. Exposed for tests.
double HistogramQuantile(const metrics::Histogram::Snapshot& h, double q);

}  // namespace tarmac::control
