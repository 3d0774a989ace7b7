// Routing policies: given a request's features, pick a model of the pool or a cascade. A
// route's policy is a tree: rules (ordered conditions on the features) whose leaves are a model
// or another policy, a cascade (a small model answers first; low confidence on its first k
// tokens escalates to a large one), or the cost-latency-quality argmin (policy_argmin.h).
//
// Policies never pick a model the request's risk or SLA tier forbids (ModelView::Allowed); when
// their choice is forbidden they say so (Decision::model empty) and the route falls back to its
// baseline, which is checked the same way.
//
// Thread-safety: Decide is called from the server's I/O thread only (policies that learn,
// like argmin, keep state); the ModelView it reads is thread-safe where it reads engines.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "router/route_features.h"

namespace tarmac::router {

// Escalation rule of a cascade: keep the small model's answer when its first k tokens are
// confident enough, by the mean logprob of the chosen tokens, by the smallest top-1/top-2
// logprob margin among them, or both (each threshold off at -infinity).
struct CascadeParams {
  std::string small, large;
  int32_t k = 8;
  double min_mean_logprob = -std::numeric_limits<double>::infinity();
  double min_margin = -std::numeric_limits<double>::infinity();
  bool full = false;  // decide on the whole answer (non-streamed requests only)
};

struct Decision {
  std::string model;                     // the model that runs first ("" : nothing allowed)
  std::optional<CascadeParams> cascade;  // set: `model` is its small model
  std::string policy;                    // the deciding leaf: "model", "cascade", "argmin"
  std::string reason;                    // why, for logs, responses and metrics
};

// What policies may ask about the pool's models. Implemented by the Router over the pool; tests
// supply their own.
class ModelView {
 public:
  virtual ~ModelView() = default;
  virtual bool Exists(const std::string& model) const = 0;
  // The request's risk and SLA tier may be served by the model.
  virtual bool Allowed(const std::string& model, const RouteFeatures& f) const = 0;
  // Predicted seconds until the request's last token on this model (queue, prefill, decode).
  virtual double PredictLatency(const std::string& model, const RouteFeatures& f) const = 0;
  // Cost of serving the request on the model, in the configured price unit.
  virtual double Cost(const std::string& model, const RouteFeatures& f) const = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual Decision Decide(const RouteFeatures& f, const ModelView& view) = 0;
  // Every model this policy can pick (config validation checks they exist).
  virtual void Models(std::vector<std::string>* out) const = 0;
  // A finished request's outcome for the (bucket, model) it ran on: score in [0, 1]
  // (feedback, or implicit: escalation, errors). Policies that learn use it.
  virtual void Observe(metrics::BucketId bucket, const std::string& model, double score) {
    (void)bucket, (void)model, (void)score;
  }
};

// A leaf: always the same model.
class ModelPolicy final : public Policy {
 public:
  explicit ModelPolicy(std::string model) : model_(std::move(model)) {}
  Decision Decide(const RouteFeatures& f, const ModelView& view) override;
  void Models(std::vector<std::string>* out) const override { out->push_back(model_); }

 private:
  std::string model_;
};

// A leaf: the small model first, escalation decided by the target (CascadeTarget). Goes straight
// to the large model when the small one is forbidden.
class CascadePolicy final : public Policy {
 public:
  explicit CascadePolicy(CascadeParams p) : p_(std::move(p)) {}
  Decision Decide(const RouteFeatures& f, const ModelView& view) override;
  void Models(std::vector<std::string>* out) const override;
  const CascadeParams& params() const { return p_; }

 private:
  CascadeParams p_;
};

// Conditions on the features; every one given must hold (empty lists and unset bounds match
// anything).
struct Condition {
  std::optional<int64_t> min_prompt_tokens, max_prompt_tokens;
  std::optional<int64_t> min_max_tokens, max_max_tokens;
  std::vector<std::string> tasks, slas, tenants;
  std::optional<metrics::Risk> risk;
  std::optional<Pattern> last_user_matches;
  bool Matches(const RouteFeatures& f) const;
};

// Ordered rules: the first whose condition holds decides through its policy; when none does,
// the fallback policy (if any) decides, else the decision is empty (the route's baseline).
class RulesPolicy final : public Policy {
 public:
  struct Rule {
    Condition when;
    std::unique_ptr<Policy> use;
  };
  RulesPolicy(std::vector<Rule> rules, std::unique_ptr<Policy> otherwise);
  Decision Decide(const RouteFeatures& f, const ModelView& view) override;
  void Models(std::vector<std::string>* out) const override;
  void Observe(metrics::BucketId bucket, const std::string& model, double score) override;

 private:
  std::vector<Rule> rules_;
  std::unique_ptr<Policy> otherwise_;
};

}  // namespace tarmac::router
