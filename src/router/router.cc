#include "router/router.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "base/check.h"
#include "model/llama_model.h"
#include "router/route_target.h"

namespace tarmac::router {
namespace {

const std::vector<double> kDecisionBounds = {1e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 5e-3};

std::vector<std::string> RequestLabels() {
  std::vector<std::string> l = {"route", "model_name", "outcome"};
  for (const std::string& n : metrics::BucketTable::LabelNames()) l.push_back(n);
  return l;
}

}  // namespace

Router::Router(RouterConfig config, ModelPool* pool, std::shared_ptr<metrics::Registry> registry)
    : config_(std::move(config)), pool_(pool), registry_(std::move(registry)) {
  TARMAC_CHECK(pool_ != nullptr && registry_ != nullptr);
  for (RouteConfig& r : config_.routes) {
    auto route = std::make_unique<Route>();
    route->config = std::move(r);
    if (route->config.policy) route->config.policy->Models(&route->models);
    route->models.push_back(route->config.baseline);
    std::sort(route->models.begin(), route->models.end());
    route->models.erase(std::unique(route->models.begin(), route->models.end()), route->models.end());
    routes_.push_back(std::move(route));
  }
  config_.routes.clear();
  requests_ = &registry_->Counters("tarmac:route_requests_total",
                                   "Routed requests by route, the model that answered and outcome (served, escalated, "
                                   "fallback, error), per request bucket.",
                                   RequestLabels());
  feedback_count_ = &registry_->Counters("tarmac:route_feedback_total", "Feedback scores received, by route and model.",
                                         {"route", "model_name"});
  decision_seconds_ = &registry_->Histograms("tarmac:route_decision_seconds", "Time to decide a route.", {"route"},
                                             kDecisionBounds);
}

Router::~Router() = default;

const ModelInfo* Router::Info(const std::string& model) const {
  for (const ModelInfo& m : config_.models)
    if (m.name == model) return &m;
  return nullptr;
}

bool Router::Exists(const std::string& model) const { return pool_->Find(model) != nullptr; }

bool Router::Allowed(const std::string& model, const RouteFeatures& f) const {
  if (!Exists(model)) return false;
  const ModelInfo* i = Info(model);
  if (i == nullptr) return true;
  if (std::find(i->allowed_risk.begin(), i->allowed_risk.end(), f.risk) == i->allowed_risk.end()) return false;
  return i->allowed_sla.empty() || std::find(i->allowed_sla.begin(), i->allowed_sla.end(), f.sla) != i->allowed_sla.end();
}

double Router::PredictLatency(const std::string& model, const RouteFeatures& f) const {
  const PoolModel* m = pool_->Find(model);
  if (m == nullptr) return 0;
  const engine::EngineStats st = m->engine->Stats();
  const int32_t batch = std::max(1, st.num_running + 1);
  const double step = m->engine->decode_costs().Seconds(batch);
  const double prefill = m->engine->prefill_costs().Seconds(static_cast<double>(f.prompt_tokens));
  // Waiting requests ahead each need about a full decode of the batch's share.
  const int32_t cap = m->engine->config().sched.max_running;
  const double queue = st.num_running >= cap ? static_cast<double>(st.num_waiting + 1) / cap * f.max_tokens * step : 0;
  return queue + prefill + static_cast<double>(f.max_tokens) * step;
}

double Router::Cost(const std::string& model, const RouteFeatures& f) const {
  const double tokens = static_cast<double>(f.prompt_tokens + f.max_tokens);
  const ModelInfo* i = Info(model);
  if (i != nullptr && i->price_per_1k) return *i->price_per_1k * tokens / 1000.0;
  // Measured: CPU-seconds per 1000 tokens of a batch-1 decode step on the model's threads.
  const PoolModel* m = pool_->Find(model);
  if (m == nullptr) return 0;
  return m->engine->decode_costs().Seconds(1) * m->engine->config().threads * tokens;
}

Status Router::Validate() const {
  std::set<std::string> names;
  for (const auto& r : routes_) {
    if (!names.insert(r->config.name).second) return InvalidField("routes", "route '{}' is defined twice", r->config.name);
    if (pool_->Find(r->config.name) != nullptr)
      return InvalidField("routes", "route '{}' has the name of a served model", r->config.name);
    if (!Exists(r->config.baseline))
      return InvalidField("routes", "route '{}': baseline '{}' is not a served model", r->config.name, r->config.baseline);
    std::vector<std::string> used;
    if (r->config.policy) r->config.policy->Models(&used);
    for (const std::string& m : used)
      if (!Exists(m)) return InvalidField("routes", "route '{}' uses model '{}', which is not served", r->config.name, m);
  }
  for (const ModelInfo& m : config_.models)
    if (!Exists(m.name)) return InvalidField("models", "model '{}' is not served", m.name);
  return Status::Ok();
}

bool Router::IsRoute(const std::string& name) const {
  for (const auto& r : routes_)
    if (r->config.name == name) return true;
  return false;
}

const std::string& Router::baseline(const std::string& route) const {
  for (const auto& r : routes_)
    if (r->config.name == route) return r->config.baseline;
  ::tarmac::detail::CheckFailed("IsRoute(route)", __FILE__, __LINE__);
}

namespace {
int64_t WeightBytes(const PoolModel* m) { return m != nullptr && m->model != nullptr ? m->model->weight_bytes() : 0; }
}  // namespace

bool Router::HasSmallerModel(const std::string& model) const {
  const PoolModel* m = pool_->Find(model);
  if (m == nullptr) return false;
  for (const auto& r : routes_) {
    if (std::find(r->models.begin(), r->models.end(), model) == r->models.end()) continue;
    for (const std::string& o : r->models) {
      const PoolModel* x = pool_->Find(o);
      if (x != nullptr && WeightBytes(x) < WeightBytes(m)) return true;
    }
  }
  return false;
}

void Router::SetRouteSmaller(const std::string& model, bool on) {
  std::lock_guard<std::mutex> lock(degraded_mu_);
  if (on) {
    degraded_.insert(model);
  } else {
    degraded_.erase(model);
  }
}

void Router::SetLowestTiers(std::function<bool(std::string_view)> is_lowest) { is_lowest_ = std::move(is_lowest); }

std::string Router::SmallerFor(const Route& route, const std::string& model, const RouteFeatures& f) const {
  if (!is_lowest_ || !is_lowest_(f.sla.empty() ? std::string_view(metrics::kDefaultSla) : std::string_view(f.sla))) return "";
  {
    std::lock_guard<std::mutex> lock(degraded_mu_);
    if (degraded_.count(model) == 0) return "";
  }
  const PoolModel* m = pool_->Find(model);
  if (m == nullptr) return "";
  std::string best;
  int64_t best_bytes = -1;
  for (const std::string& o : route.models) {
    const PoolModel* x = pool_->Find(o);
    if (x == nullptr || WeightBytes(x) >= WeightBytes(m) || !Allowed(o, f)) continue;
    if (WeightBytes(x) > best_bytes) {
      best = o;
      best_bytes = WeightBytes(x);
    }
  }
  return best;
}

std::vector<std::string> Router::route_names() const {
  std::vector<std::string> out;
  for (const auto& r : routes_) out.push_back(r->config.name);
  return out;
}

std::unique_ptr<Target> Router::MakeTarget(const std::string& route, const std::string& tenant) {
  for (const auto& r : routes_)
    if (r->config.name == route) return std::make_unique<RouteTarget>(this, r.get(), tenant);
  TARMAC_CHECK(false && "MakeTarget of an unknown route");
  return nullptr;
}

RouteFeatures Router::Features(const GenerationSpec& spec, const PreparedRequests& probe) const {
  RouteFeatures f;
  f.prompt_tokens = probe.prompt_tokens.empty() ? 0 : probe.prompt_tokens[0];
  f.max_tokens = probe.requests.empty() ? 0 : probe.requests[0].request().max_tokens;
  f.tenant = spec.tenant;
  f.temperature = spec.sampling.temperature;
  f.last_user_message = spec.last_user_message;
  f.sla = spec.sla;
  f.task = spec.task;
  f.risk = spec.risk;
  bool risk_given = spec.risk_given;
  for (const TaskRule& rule : config_.task_rules) {
    if (!rule.pattern.Search(f.last_user_message)) continue;
    if (f.task.empty() && rule.task) f.task = *rule.task;
    if (!risk_given && rule.risk) {
      f.risk = *rule.risk;
      risk_given = true;
    }
  }
  if (f.task.empty()) f.task = config_.default_task;
  // The engine's features of the probe's first request, with what the task rules decided.
  metrics::RequestFeatures bf = probe.requests.empty() ? metrics::RequestFeatures{} : engine::BucketFeatures(probe.requests[0].request());
  bf.task = f.task;
  bf.risk = f.risk;
  f.bucket = registry_->buckets().Of(bf);
  return f;
}

void Router::DecisionTime(const Route& route, double seconds) {
  decision_seconds_->With({route.config.name}).Observe(seconds);
}

void Router::Finished(const Route& route, const RouteFeatures& f, const RouteInfo& info, const std::string& response_id,
                      const std::string& tenant, bool error) {
  const std::string outcome = error ? "error" : info.escalated ? "escalated" : info.fallback ? "fallback" : "served";
  metrics::LabelValues labels = {route.config.name, info.model, outcome};
  for (const std::string& v : registry_->buckets().LabelValues(f.bucket)) labels.push_back(v);
  requests_->With(labels).Add();
  // Implicit feedback: an escalation says the small model would not have done; an error scores 0.
  if (Policy* policy = route.config.policy.get()) {
    if (info.escalated) policy->Observe(f.bucket, info.escalated_from, 0.0);
    if (error) policy->Observe(f.bucket, info.model, 0.0);
  }
  if (error || response_id.empty()) return;
  if (feedback_.size() >= config_.feedback_capacity && !feedback_order_.empty()) {
    feedback_.erase(feedback_order_.front());
    feedback_order_.pop_front();
  }
  if (feedback_.emplace(response_id, FeedbackEntry{&route, tenant, info.model, f.bucket}).second)
    feedback_order_.push_back(response_id);
}

Status Router::Feedback(const std::string& response_id, const std::string& tenant, double score) {
  if (!(score >= 0.0 && score <= 1.0)) return InvalidField("score", "'score' must be in [0, 1], got {}", score);
  auto it = feedback_.find(response_id);
  if (it == feedback_.end() || it->second.tenant != tenant)
    return NotFound("no routed response with id '{}' (it may be too old)", response_id);
  const FeedbackEntry& e = it->second;
  if (e.route->config.policy) e.route->config.policy->Observe(e.bucket, e.model, score);
  feedback_count_->With({e.route->config.name, e.model}).Add();
  return Status::Ok();
}

}  // namespace tarmac::router
