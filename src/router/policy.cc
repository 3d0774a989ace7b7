#include "router/policy.h"

#include <algorithm>

#include <fmt/format.h>

namespace tarmac::router {
namespace {

bool In(const std::vector<std::string>& set, const std::string& v) {
  return set.empty() || std::find(set.begin(), set.end(), v) != set.end();
}

}  // namespace

bool Condition::Matches(const RouteFeatures& f) const {
  if (min_prompt_tokens && f.prompt_tokens < *min_prompt_tokens) return false;
  if (max_prompt_tokens && f.prompt_tokens > *max_prompt_tokens) return false;
  if (min_max_tokens && f.max_tokens < *min_max_tokens) return false;
  if (max_max_tokens && f.max_tokens > *max_max_tokens) return false;
  if (!In(tasks, f.task) || !In(slas, f.sla) || !In(tenants, f.tenant)) return false;
  if (risk && f.risk != *risk) return false;
  if (last_user_matches && !last_user_matches->Search(f.last_user_message)) return false;
  return true;
}

Decision ModelPolicy::Decide(const RouteFeatures& f, const ModelView& view) {
  Decision d;
  d.policy = "model";
  if (!view.Allowed(model_, f)) {
    d.reason = fmt::format("{} may not serve risk {} / SLA tier {}", model_, metrics::RiskName(f.risk), f.sla);
    return d;
  }
  d.model = model_;
  d.reason = "model " + model_;
  return d;
}

Decision CascadePolicy::Decide(const RouteFeatures& f, const ModelView& view) {
  Decision d;
  d.policy = "cascade";
  const bool small_ok = view.Allowed(p_.small, f), large_ok = view.Allowed(p_.large, f);
  if (small_ok && large_ok) {
    d.model = p_.small;
    d.cascade = p_;
    d.reason = fmt::format("cascade {} -> {} at k = {}", p_.small, p_.large, p_.k);
  } else if (large_ok) {
    d.model = p_.large;
    d.reason = fmt::format("cascade: {} may not serve this request, straight to {}", p_.small, p_.large);
  } else {
    d.reason = fmt::format("cascade: {} may not serve risk {} / SLA tier {}", p_.large, metrics::RiskName(f.risk), f.sla);
  }
  return d;
}

void CascadePolicy::Models(std::vector<std::string>* out) const {
  out->push_back(p_.small);
  out->push_back(p_.large);
}

RulesPolicy::RulesPolicy(std::vector<Rule> rules, std::unique_ptr<Policy> otherwise)
    : rules_(std::move(rules)), otherwise_(std::move(otherwise)) {}

Decision RulesPolicy::Decide(const RouteFeatures& f, const ModelView& view) {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (!rules_[i].when.Matches(f)) continue;
    Decision d = rules_[i].use->Decide(f, view);
    d.reason = fmt::format("rule {}: {}", i, d.reason);
    return d;
  }
  if (otherwise_) {
    Decision d = otherwise_->Decide(f, view);
    d.reason = "otherwise: " + d.reason;
    return d;
  }
  Decision none;
  none.policy = "rules";
  none.reason = "no rule matched";
  return none;
}

void RulesPolicy::Models(std::vector<std::string>* out) const {
  for (const Rule& r : rules_) r.use->Models(out);
  if (otherwise_) otherwise_->Models(out);
}

void RulesPolicy::Observe(metrics::BucketId bucket, const std::string& model, double score) {
  for (Rule& r : rules_) r.use->Observe(bucket, model, score);
  if (otherwise_) otherwise_->Observe(bucket, model, score);
}

}  // namespace tarmac::router
