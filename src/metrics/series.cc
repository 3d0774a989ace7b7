#include "metrics/series.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace tarmac::metrics {

void Counter::Add(double v) {
  TARMAC_DCHECK(v >= 0);
  v_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()), counts_(bounds.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    TARMAC_CHECK(std::isfinite(bounds_[i]));
    TARMAC_CHECK(i == 0 || bounds_[i] > bounds_[i - 1]);
  }
}

void Histogram::Observe(double x) { ObserveAll(std::span<const double>(&x, 1)); }

void Histogram::ObserveAll(std::span<const double> xs) {
  std::lock_guard<std::mutex> lock(mu_);
  for (double x : xs) {
    // The first bucket whose bound is >= x (Prometheus buckets are "less than or equal").
    const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin());
    ++counts_[i];
    sum_ += x;
    ++count_;
  }
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  s.cumulative.resize(counts_.size());
  uint64_t cum = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cum += counts_[i];
    s.cumulative[i] = cum;
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

}  // namespace tarmac::metrics
