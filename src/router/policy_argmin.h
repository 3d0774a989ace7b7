// ArgminPolicy: m* = argmin over the allowed candidates of
//   lambda_cost * cost(m, x) + lambda_latency * latency(m, x) - lambda_quality * quality(m, x),
// with cost and latency from the ModelView (configured price or measured CPU time; predicted
// queue, prefill and decode from the model's measured step costs) and quality learned online
// per (request bucket, model) from scores in [0, 1] (POST /v1/feedback, and implicit signals:
// an escalation scores the small model low for the bucket, errors score 0).
//
// Quality per (bucket, model) is the decayed mean and variance of its scores (every observation
// fades the older ones, so the estimate follows a shift); decisions use a Thompson sample from
// the normal posterior of that mean (exploration that fades as evidence grows).
// With probability `explore` a uniformly random allowed candidate is chosen instead, so a model
// that stopped being picked gets its latency measured again (its step costs only update while
// it runs).
//
// Not thread-safe: the server's I/O thread decides and observes. Seeded: deterministic for a
// given sequence of calls.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "router/policy.h"

namespace tarmac::router {

struct ArgminParams {
  std::vector<std::string> models;  // candidates, >= 1
  double lambda_cost = 1.0;
  double lambda_latency = 1.0;      // per second
  double lambda_quality = 1.0;
  double explore = 0.05;            // probability of a random candidate
  double decay = 0.99;              // weight kept per observation of a (bucket, model)
  uint64_t seed = 1;
};

// The decayed mean and variance of a stream of scores in [0, 1], with a weak prior (one
// observation of 0.5 with the variance of a uniform score), and samples of the mean from its
// normal posterior.
class QualityEstimate {
 public:
  explicit QualityEstimate(double decay) : decay_(decay) {}
  void Observe(double score);
  double Mean() const { return sum_ / weight_; }
  double Sample(std::mt19937_64& rng) const;
  double evidence() const { return weight_ - 1.0; }  // decayed observations

 private:
  double decay_;
  double weight_ = 1.0;           // decayed count, the prior's included
  double sum_ = 0.5;              // decayed sum of scores
  double sum_sq_ = 0.25 + 1.0 / 12;  // decayed sum of squares (prior: mean 0.5, variance 1/12)
};

class ArgminPolicy final : public Policy {
 public:
  explicit ArgminPolicy(ArgminParams p);
  Decision Decide(const RouteFeatures& f, const ModelView& view) override;
  void Models(std::vector<std::string>* out) const override;
  void Observe(metrics::BucketId bucket, const std::string& model, double score) override;

  // The posterior mean quality of (bucket, model) (0.5 before any observation).
  double QualityMean(metrics::BucketId bucket, const std::string& model) const;
  const ArgminParams& params() const { return p_; }

 private:
  QualityEstimate& Estimate(metrics::BucketId bucket, const std::string& model);

  ArgminParams p_;
  std::map<std::pair<metrics::BucketId, std::string>, QualityEstimate> quality_;
  std::mt19937_64 rng_;
};

}  // namespace tarmac::router
