// StepCostCurve: measured seconds of one engine step against the tokens in it (decode batches
// of B requests are B tokens; prefill chunks their length), the one curve the planner's
// predictions and queueing simulation run on. Piecewise linear through the measured points;
// below the smallest, that point's cost (a step never costs less than the smallest measured
// one: at small sizes a step reads all the weights whatever its size); beyond the largest,
// the slope of the last two points (compute-bound growth).
//
// Plain value; thread-safe to read.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tarmac::control {

class StepCostCurve {
 public:
  // Adds a measurement; a second one at the same size is averaged with the first.
  // Preconditions: tokens >= 1, seconds > 0 and finite (asserted).
  void Add(int64_t tokens, double seconds);
  double Seconds(double tokens) const;  // Preconditions: !empty()
  bool empty() const { return points_.empty(); }
  // (tokens, seconds), ascending.
  const std::vector<std::pair<double, double>>& points() const { return points_; }

  // The batch size from which decode is compute-bound: where the growth beyond batch 1 (the
  // marginal cost per token measured at the largest size) equals the batch-1 cost, i.e. the
  // crossover of t(B) ~ max(t(1), B * marginal). Infinity when the curve does not grow.
  double ComputeBoundBatch() const;

 private:
  std::vector<std::pair<double, double>> points_;
  std::vector<int32_t> counts_;
};

}  // namespace tarmac::control
