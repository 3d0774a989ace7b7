// WindowQuantiles: quantiles (p50, p95, p99, ...) of the values observed over the last
// `window` seconds, for the controller and the SLO report, where a since-start histogram
// would hide a recent change.
//
// The window is `slices` consecutive intervals of window / slices seconds on the caller's
// clock (the current, partial one included): a value observed at time t is in the window at
// time now when floor(t / len) > floor(now / len) - slices, len = window / slices. So the window
// spans between window * (1 - 1/slices) and window seconds. Quantiles are nearest-rank: the
// q-quantile of n values is the ceil(q * n)-th smallest (the smallest for q = 0). Each slice
// keeps up to max_per_slice values; beyond that it keeps a uniform reservoir sample of them
// (seeded, deterministic), so quantiles stay exact until a slice overflows.
//
// Thread-safe (one mutex); Observe is O(1), a quantile read sorts the window's values.
// Times must not go backwards by more than a slice (a value older than the window is dropped).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace tarmac::metrics {

class WindowQuantiles {
 public:
  // Preconditions: window_s > 0, slices >= 1, max_per_slice >= 1 (asserted).
  explicit WindowQuantiles(double window_s, int32_t slices = 10, int32_t max_per_slice = 4096);

  void Observe(double value, double now_s);

  struct Summary {
    std::vector<double> quantiles;  // one per requested q; NaN when the window is empty
    uint64_t count = 0;             // values observed in the window (also those not kept)
    double sum = 0;                 // their sum
  };
  // Preconditions: every q in [0, 1].
  Summary Read(std::span<const double> qs, double now_s) const;
  double Quantile(double q, double now_s) const;

  double window_s() const { return window_s_; }

 private:
  struct Slice {
    int64_t index = INT64_MIN;    // floor(t / len) of its values; INT64_MIN: unused
    std::vector<double> kept;     // up to max_per_slice values
    uint64_t seen = 0;            // values observed in this slice
    double sum = 0;
  };
  int64_t IndexOf(double t) const;
  bool Live(const Slice& s, int64_t now_index) const;

  const double window_s_;
  const double len_s_;
  const int32_t max_per_slice_;
  mutable std::mutex mu_;
  std::vector<Slice> ring_;  // [slices], slice i at ring_[index mod slices]
  uint64_t rng_ = 0x9E3779B97F4A7C15ull;
};

}  // namespace tarmac::metrics
