#include "control/step_cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace tarmac::control {

void StepCostCurve::Add(int64_t tokens, double seconds) {
  TARMAC_CHECK(tokens >= 1 && std::isfinite(seconds) && seconds > 0);
  const double n = static_cast<double>(tokens);
  auto it = std::lower_bound(points_.begin(), points_.end(), std::make_pair(n, -1.0));
  const size_t i = static_cast<size_t>(it - points_.begin());
  if (it != points_.end() && it->first == n) {
    it->second = (it->second * counts_[i] + seconds) / (counts_[i] + 1);
    ++counts_[i];
    return;
  }
  points_.insert(it, {n, seconds});
  counts_.insert(counts_.begin() + static_cast<std::ptrdiff_t>(i), 1);
}

double StepCostCurve::Seconds(double n) const {
  TARMAC_CHECK(!points_.empty());
  if (n <= points_.front().first) return points_.front().second;
  for (size_t i = 1; i < points_.size(); ++i) {
    if (n <= points_[i].first) {
      const auto [x0, y0] = points_[i - 1];
      const auto [x1, y1] = points_[i];
      return y0 + (y1 - y0) * (n - x0) / (x1 - x0);
    }
  }
  if (points_.size() == 1) return points_.back().second * n / points_.back().first;
  const auto [x0, y0] = points_[points_.size() - 2];
  const auto [x1, y1] = points_.back();
  const double slope = std::max(0.0, (y1 - y0) / (x1 - x0));
  return y1 + slope * (n - x1);
}

double StepCostCurve::ComputeBoundBatch() const {
  if (points_.size() < 2) return std::numeric_limits<double>::infinity();
  const double t1 = Seconds(1.0);
  const auto [xn, yn] = points_.back();
  const double marginal = (yn - t1) / (xn - 1.0);
  if (marginal <= 0) return std::numeric_limits<double>::infinity();
  return t1 / marginal;
}

}  // namespace tarmac::control
