#include "metrics/window_quantiles.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"
#include "base/hash.h"

namespace tarmac::metrics {

WindowQuantiles::WindowQuantiles(double window_s, int32_t slices, int32_t max_per_slice)
    : window_s_(window_s), len_s_(window_s / std::max(slices, 1)), max_per_slice_(max_per_slice),
      ring_(static_cast<size_t>(std::max(slices, 1))) {
  TARMAC_CHECK(window_s > 0 && std::isfinite(window_s) && slices >= 1 && max_per_slice >= 1);
}

int64_t WindowQuantiles::IndexOf(double t) const { return static_cast<int64_t>(std::floor(t / len_s_)); }

bool WindowQuantiles::Live(const Slice& s, int64_t now_index) const {
  return s.index != INT64_MIN && s.index > now_index - static_cast<int64_t>(ring_.size()) &&
         s.index <= now_index;
}

void WindowQuantiles::Observe(double value, double now_s) {
  const int64_t idx = IndexOf(now_s);
  const int64_t n = static_cast<int64_t>(ring_.size());
  std::lock_guard<std::mutex> lock(mu_);
  Slice& s = ring_[static_cast<size_t>(((idx % n) + n) % n)];
  if (s.index != idx) {
    if (s.index != INT64_MIN && s.index > idx) return;  // older than what the slot holds now
    s.index = idx;
    s.kept.clear();
    s.seen = 0;
    s.sum = 0;
  }
  ++s.seen;
  s.sum += value;
  if (static_cast<int64_t>(s.kept.size()) < max_per_slice_) {
    s.kept.push_back(value);
    return;
  }
  // Reservoir sampling: the seen-th value replaces a kept one with probability kept / seen.
  rng_ = SplitMix64(rng_);
  const uint64_t j = rng_ % s.seen;
  if (j < s.kept.size()) s.kept[static_cast<size_t>(j)] = value;
}

WindowQuantiles::Summary WindowQuantiles::Read(std::span<const double> qs, double now_s) const {
  const int64_t now_index = IndexOf(now_s);
  Summary out;
  std::vector<double> values;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Slice& s : ring_) {
      if (!Live(s, now_index)) continue;
      values.insert(values.end(), s.kept.begin(), s.kept.end());
      out.count += s.seen;
      out.sum += s.sum;
    }
  }
  std::sort(values.begin(), values.end());
  out.quantiles.reserve(qs.size());
  for (double q : qs) {
    TARMAC_CHECK(q >= 0 && q <= 1);
    if (values.empty()) {
      out.quantiles.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    // The epsilon keeps q * n from rounding up past an exact rank (0.95 * 20 = 19.000000000000004).
    const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size()) - 1e-9));
    out.quantiles.push_back(values[rank == 0 ? 0 : rank - 1]);
  }
  return out;
}

double WindowQuantiles::Quantile(double q, double now_s) const {
  const double qs[] = {q};
  return Read(qs, now_s).quantiles[0];
}

}  // namespace tarmac::metrics
