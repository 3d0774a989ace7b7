#include "router/route_target.h"

#include <fmt/format.h>

#include "base/check.h"
#include "base/clock.h"

namespace tarmac::router {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

RouteTarget::RouteTarget(Router* router, const Router::Route* route, std::string tenant)
    : router_(router), route_(route), tenant_(std::move(tenant)) {
  TARMAC_CHECK(router != nullptr && route != nullptr);
  base_ = router_->pool_model(route_->config.baseline);  // here: Probe may not read the router
  info_.route = route->config.name;
}

const PoolModel& RouteTarget::model() const {
  TARMAC_CHECK(inner_ != nullptr);
  return inner_->model();
}

Status RouteTarget::UseModel(const std::string& name) {
  PoolModel* m = router_->pool_model(name);
  if (m == nullptr) return Unavailable(fmt::format("route {}: model {} is not served", info_.route, name));
  model_ = m;
  cascade_ = nullptr;
  inner_ = std::make_unique<EngineTarget>(m);
  info_.model = name;
  return Status::Ok();
}

Result<PreparedRequests> RouteTarget::Probe(const GenerationSpec& spec) const {
  if (base_ == nullptr)
    return Unavailable(fmt::format("route {}: its baseline {} is not served", info_.route, route_->config.baseline));
  // The baseline's tokenizer counts the prompt (and checks the request) for the features.
  return router::Prepare(*base_, spec);
}

Status RouteTarget::Decide(const GenerationSpec& spec, const PreparedRequests& probe) {
  TARMAC_CHECK(!decided_);
  const std::string& baseline = route_->config.baseline;
  features_ = router_->Features(spec, probe);
  spec_ = spec;
  spec_.task = features_.task;
  spec_.sla = features_.sla;
  spec_.risk = features_.risk;
  const double t0 = NowSeconds();
  Decision d = route_->config.policy ? route_->config.policy->Decide(features_, *router_) : Decision{};
  router_->DecisionTime(*route_, NowSeconds() - t0);
  info_.policy = d.policy.empty() ? "baseline" : d.policy;
  info_.reason = d.reason.empty() ? "the baseline" : d.reason;
  decided_ = true;
  if (d.model.empty() || !router_->Exists(d.model)) {
    // The policy picked nothing it may use: the baseline, if it may serve the request.
    if (!router_->Allowed(baseline, features_)) {
      return Unavailable(fmt::format("route {}: no model may serve risk {} / SLA tier {} ({}); baseline {} may not either",
                                     info_.route, metrics::RiskName(features_.risk), features_.sla, info_.reason, baseline));
    }
    info_.fallback = true;
    return UseModel(baseline);
  }
  if (d.cascade && !spec.cascadable()) {
    info_.reason += "; constrained output or prompt logprobs: the cascade's large model answers";
    return UseModel(d.cascade->large);
  }
  if (d.cascade) {
    PoolModel* small = router_->pool_model(d.cascade->small);
    PoolModel* large = router_->pool_model(d.cascade->large);
    if (small == nullptr || large == nullptr) return UseModel(baseline);
    auto c = std::make_unique<CascadeTarget>(small, large, *d.cascade);
    cascade_ = c.get();
    model_ = small;
    inner_ = std::move(c);
    info_.model = small->name;
    return Status::Ok();
  }
  // The controller may have this model's lowest tiers degraded to a smaller model.
  if (std::string smaller = router_->SmallerFor(*route_, d.model, features_); !smaller.empty()) {
    info_.degraded = true;
    info_.reason += fmt::format("; degraded: {} sends the lowest SLA tiers to the smaller {}", d.model, smaller);
    return UseModel(smaller);
  }
  return UseModel(d.model);
}

Result<PreparedRequests> RouteTarget::Prepare(const GenerationSpec& spec) {
  if (!decided_) {
    TARMAC_ASSIGN_OR_RETURN(PreparedRequests probe, Probe(spec));
    TARMAC_RETURN_IF_ERROR(Decide(spec, probe));
  }
  return inner_->Prepare(spec_);
}

Status RouteTarget::Start(PreparedRequests prepared, std::function<void()> notify) {
  return inner_->Start(std::move(prepared), std::move(notify));
}

Status RouteTarget::Fallback(const std::string& reason) {
  const std::string& baseline = route_->config.baseline;
  tried_.push_back(model_ != nullptr ? model_->name : info_.model);
  const bool on_baseline = model_ != nullptr && model_->name == baseline && cascade_ == nullptr;
  if (on_baseline || !router_->Allowed(baseline, features_)) {
    return Unavailable(fmt::format("route {}: no model could take the request ({}); tried {}", info_.route, reason,
                                   Join(tried_)));
  }
  info_.fallback = true;
  info_.reason += "; fallback to the baseline: " + reason;
  return UseModel(baseline);
}

std::optional<RouteInfo> RouteTarget::route_info() const {
  RouteInfo info = info_;
  if (cascade_ != nullptr) {
    info.escalated = cascade_->escalated();
    info.model = cascade_->model().name;
    if (info.escalated) info.escalated_from = cascade_->params().small;
    if (cascade_->decided()) {
      const Confidence& c = cascade_->confidence();
      info.reason += fmt::format("; {} (mean logprob {:.3f}, min margin {:.3f} over {} tokens)",
                                 cascade_->escalated() ? "escalated" : "kept", c.mean_logprob, c.min_margin, c.tokens);
    }
  }
  return info;
}

void RouteTarget::Finished(const std::string& response_id, bool error) {
  if (!decided_ || inner_ == nullptr) return;
  router_->Finished(*route_, features_, *route_info(), response_id, tenant_, error);
}

}  // namespace tarmac::router
