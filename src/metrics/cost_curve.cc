#include "metrics/cost_curve.h"

#include <algorithm>

namespace tarmac::metrics {

int CostCurve::Bin(int32_t size) {
  int b = 0;
  while ((1 << (b + 1)) <= size && b < 15) ++b;
  return b;
}

void CostCurve::Observe(int32_t n, double s) {
  std::lock_guard<std::mutex> lock(mu_);
  const int b = Bin(n);
  // A busy host only adds time: a step of a bin counts at most 1.5x the bin's fastest
  // (which drifts up 2% an observation, so a machine that really got slower is followed),
  // and so does the average when a faster step shows the earlier ones were outliers. One
  // spike (another process took the core) must not price a step size out of use: it is
  // then never measured again.
  floor_[b] = count_[b] == 0 ? s : std::min(s, floor_[b] * 1.02);
  s = std::min(s, 1.5 * floor_[b]);
  seconds_[b] = std::min(seconds_[b], 1.5 * floor_[b]);
  if (count_[b] < 10) ++count_[b];
  const double w = 1.0 / count_[b];  // 1, 1/2, ..., 1/10, then 1/10 for good
  seconds_[b] = (1 - w) * seconds_[b] + w * s;
  size_[b] = (1 - w) * size_[b] + w * n;
}

int32_t CostCurve::BinCount(int32_t size) const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_[Bin(std::max(size, 1))];
}

bool CostCurve::measured() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (double s : size_)
    if (s > 0) return true;
  return false;
}

bool CostCurve::Within(double n, double* value, double* top_n, double* top_s) const {
  std::lock_guard<std::mutex> lock(mu_);
  return WithinLocked(n, value, top_n, top_s);
}

bool CostCurve::LargestUpTo(double n, double* at_n, double* at_s) const {
  std::lock_guard<std::mutex> lock(mu_);
  return LargestUpToLocked(n, at_n, at_s);
}

bool CostCurve::WithinLocked(double n, double* value, double* top_n, double* top_s) const {
  double prev_n = -1, prev_s = 0;
  for (int b = 0; b < 16; ++b) {
    if (size_[b] <= 0) continue;
    if (n <= size_[b]) {
      *value = prev_n < 0 ? seconds_[b] * n / size_[b]  // below every measurement
                          : prev_s + (n - prev_n) / (size_[b] - prev_n) * (seconds_[b] - prev_s);
      return true;
    }
    prev_n = size_[b];
    prev_s = seconds_[b];
  }
  *top_n = prev_n;
  *top_s = prev_s;
  return false;
}

bool CostCurve::LargestUpToLocked(double n, double* at_n, double* at_s) const {
  bool found = false;
  for (int b = 0; b < 16; ++b) {
    if (size_[b] > 0 && size_[b] <= n) {
      *at_n = size_[b];
      *at_s = seconds_[b];
      found = true;
    }
  }
  return found;
}

double CostCurve::Seconds(double n) const {
  std::lock_guard<std::mutex> lock(mu_);
  double value, top_n, top_s, base_n, base_s;
  if (WithinLocked(n, &value, &top_n, &top_s)) return value;
  if (top_n < 0) return 0;
  if (!LargestUpToLocked(top_n / 2, &base_n, &base_s)) return top_s * n / top_n;
  const double slope = std::max((top_s - base_s) / (top_n - base_n), 0.75 * top_s / top_n);
  return top_s + slope * (n - top_n);
}

}  // namespace tarmac::metrics
