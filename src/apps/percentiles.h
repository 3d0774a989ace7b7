// Latency summaries shared by the benchmark subcommands (bench offline, bench serve).
#pragma once

#include <algorithm>
#include <vector>

namespace tarmac::apps {

struct Percentiles {
  double mean = 0, p50 = 0, p95 = 0, p99 = 0;
};

// Mean and linearly interpolated percentiles of v; all zero when v is empty.
inline Percentiles Summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double idx = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(idx);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
  };
  p.p50 = at(0.50);
  p.p95 = at(0.95);
  p.p99 = at(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  return p;
}

}  // namespace tarmac::apps
