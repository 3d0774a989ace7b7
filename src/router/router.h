// Router: the routes of a server (virtual model names such as `auto`, each a policy tree and a
// baseline model that is always there to fall back to), what the pool's models may serve
// (allowed risk levels and SLA tiers, price), the features a request is routed by, the
// feedback that teaches the learning policies, and the route metrics.
//
// A request naming a route gets a RouteTarget from MakeTarget; one naming a real model
// bypasses routing. RouteTarget computes the features (the baseline's tokenizer counts the
// prompt), asks the policy, and runs an EngineTarget or a CascadeTarget on the chosen model;
// when that model is forbidden, overloaded or failing it falls back to the baseline (counted).
// A model the request's risk or SLA tier forbids never serves it, fallback included.
//
// Not thread-safe: the server's I/O thread owns it (and the pool it borrows). The ModelView it
// gives policies reads the engines, which are thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "metrics/registry.h"
#include "router/model_pool.h"
#include "router/policy.h"
#include "router/target.h"

namespace tarmac::router {

struct ModelInfo {
  std::string name;                   // a pool model
  std::string tier;                   // descriptive ("small", "large"), for reports
  std::optional<double> price_per_1k; // cost per 1000 tokens; none: measured CPU-seconds per 1000
  std::vector<metrics::Risk> allowed_risk = {metrics::Risk::kLow, metrics::Risk::kHigh};
  std::vector<std::string> allowed_sla;  // empty: every tier
};

struct RouteConfig {
  std::string name;                // what requests put in `model`
  std::unique_ptr<Policy> policy;  // null: always the baseline
  std::string baseline;            // a pool model
};

struct RouterConfig {
  std::vector<ModelInfo> models;   // pool models not listed may serve anything, priced as measured
  std::vector<RouteConfig> routes;
  std::vector<TaskRule> task_rules;  // first match sets task / risk when the request does not
  std::string default_task = "chat";
  size_t feedback_capacity = 100000;  // response ids remembered for POST /v1/feedback
};

class Router : public ModelView {
 public:
  Router(RouterConfig config, ModelPool* pool, std::shared_ptr<metrics::Registry> registry);
  ~Router() override;

  // Every model the config names is in the pool; every route's baseline may serve some request.
  Status Validate() const;
  bool IsRoute(const std::string& name) const;
  // A route's baseline model. Preconditions: IsRoute(route).
  const std::string& baseline(const std::string& route) const;
  std::vector<std::string> route_names() const;
  // Preconditions: IsRoute(route).
  std::unique_ptr<Target> MakeTarget(const std::string& route, const std::string& tenant);

  // Feedback on a response the same tenant received: score in [0, 1]. Errors: unknown id
  // (NotFound), score out of range (InvalidArgument, field "score").
  Status Feedback(const std::string& response_id, const std::string& tenant, double score);

  // ModelView.
  bool Exists(const std::string& model) const override;
  bool Allowed(const std::string& model, const RouteFeatures& f) const override;
  double PredictLatency(const std::string& model, const RouteFeatures& f) const override;
  double Cost(const std::string& model, const RouteFeatures& f) const override;

  // Called by RouteTarget.
  struct Route;
  RouteFeatures Features(const GenerationSpec& spec, const PreparedRequests& baseline_prep) const;
  void Finished(const Route& route, const RouteFeatures& f, const RouteInfo& info, const std::string& response_id,
                const std::string& tenant, bool error);
  void DecisionTime(const Route& route, double seconds);
  PoolModel* pool_model(const std::string& name) const { return pool_->Find(name); }
  metrics::Registry& registry() { return *registry_; }

 private:
  const ModelInfo* Info(const std::string& model) const;
  struct FeedbackEntry {
    const Route* route;
    std::string tenant, model;
    metrics::BucketId bucket;
  };

  RouterConfig config_;
  ModelPool* pool_;
  std::shared_ptr<metrics::Registry> registry_;
  std::vector<std::unique_ptr<Route>> routes_;
  std::unordered_map<std::string, FeedbackEntry> feedback_;
  std::deque<std::string> feedback_order_;  // oldest first, for the capacity bound
  metrics::Family<metrics::Counter>* requests_;
  metrics::Family<metrics::Counter>* feedback_count_;
  metrics::Family<metrics::Histogram>* decision_seconds_;
};

struct Router::Route {
  RouteConfig config;
};

}  // namespace tarmac::router
