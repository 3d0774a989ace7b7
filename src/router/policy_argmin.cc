#include "router/policy_argmin.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "base/check.h"

namespace tarmac::router {

void QualityEstimate::Observe(double score) {
  score = std::clamp(score, 0.0, 1.0);
  weight_ = decay_ * weight_ + 1.0;
  sum_ = decay_ * sum_ + score;
  sum_sq_ = decay_ * sum_sq_ + score * score;
}

double QualityEstimate::Sample(std::mt19937_64& rng) const {
  const double mean = Mean();
  const double var = std::max(sum_sq_ / weight_ - mean * mean, 1e-6);
  return std::normal_distribution<double>(mean, std::sqrt(var / weight_))(rng);
}

ArgminPolicy::ArgminPolicy(ArgminParams p) : p_(std::move(p)), rng_(p_.seed) { TARMAC_CHECK(!p_.models.empty()); }

void ArgminPolicy::Models(std::vector<std::string>* out) const {
  out->insert(out->end(), p_.models.begin(), p_.models.end());
}

QualityEstimate& ArgminPolicy::Estimate(metrics::BucketId bucket, const std::string& model) {
  auto key = std::make_pair(bucket, model);
  auto it = quality_.find(key);
  if (it == quality_.end()) it = quality_.emplace(std::move(key), QualityEstimate(p_.decay)).first;
  return it->second;
}

double ArgminPolicy::QualityMean(metrics::BucketId bucket, const std::string& model) const {
  auto it = quality_.find({bucket, model});
  return it == quality_.end() ? 0.5 : it->second.Mean();
}

void ArgminPolicy::Observe(metrics::BucketId bucket, const std::string& model, double score) {
  if (std::find(p_.models.begin(), p_.models.end(), model) == p_.models.end()) return;
  Estimate(bucket, model).Observe(score);
}

Decision ArgminPolicy::Decide(const RouteFeatures& f, const ModelView& view) {
  Decision d;
  d.policy = "argmin";
  std::vector<const std::string*> allowed;
  for (const std::string& m : p_.models)
    if (view.Allowed(m, f)) allowed.push_back(&m);
  if (allowed.empty()) {
    d.reason = fmt::format("argmin: no candidate may serve risk {} / SLA tier {}", metrics::RiskName(f.risk), f.sla);
    return d;
  }
  if (allowed.size() > 1 && std::uniform_real_distribution<double>(0, 1)(rng_) < p_.explore) {
    const std::string& m = *allowed[rng_() % allowed.size()];
    d.model = m;
    d.reason = "argmin: exploring " + m;
    return d;
  }
  double best = std::numeric_limits<double>::infinity();
  for (const std::string* m : allowed) {
    const double cost = view.Cost(*m, f);
    const double latency = view.PredictLatency(*m, f);
    const double quality = Estimate(f.bucket, *m).Sample(rng_);
    const double j = p_.lambda_cost * cost + p_.lambda_latency * latency - p_.lambda_quality * quality;
    if (j < best) {
      best = j;
      d.model = *m;
      d.reason = fmt::format("argmin: {} (cost {:.4g}, latency {:.3g} s, quality {:.3f})", *m, cost, latency, quality);
    }
  }
  return d;
}

}  // namespace tarmac::router
