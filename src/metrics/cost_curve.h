// CostCurve: measured seconds of a unit of work against its size (an engine step against the
// tokens in it, a draft round against its requests): per log2 size bin, an average of the size
// and of the seconds. The first observations of a bin are averaged (weight 1/count, up to ten),
// later ones decay (weight 1/10), so one cold first step does not set the price and the curve
// follows a machine that gets slower or faster. Observations (and the average) count at most
// 1.5x the bin's fastest step, which drifts up 2% per observation: a busy host's outliers
// (another process took the core) only ever add time.
//
// One curve per model feeds the speculation policy (decode steps), the router's latency
// estimate and anyone planning capacity.
//
// Thread-safe: one writer (the engine's step thread) and any readers (a short lock each).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace tarmac::metrics {

class CostCurve {
 public:
  void Observe(int32_t size, double seconds);

  // Piecewise linear through the measured (size, seconds) points; below the smallest,
  // proportional. Beyond the largest: false (and *top_n = -1 when nothing is measured), with
  // the largest measurement in *top_n / *top_s.
  bool Within(double n, double* value, double* top_n, double* top_s) const;
  // The largest measurement of size at most n: false if none.
  bool LargestUpTo(double n, double* at_n, double* at_s) const;
  // Measured or extrapolated seconds at size n (0 when nothing is measured): beyond the largest
  // measurement along the slope back to one at most half its size, but no less than 3/4 of the
  // proportional slope (a step has a large fixed part the proportional guess would scale up;
  // nearby sizes' noise must not make larger steps look free); with one measurement,
  // proportional.
  double Seconds(double n) const;
  bool measured() const;
  // Observations (up to ten counted) of the log2 bin holding `size`.
  int32_t BinCount(int32_t size) const;

 private:
  static int Bin(int32_t size);  // log2 bin
  bool WithinLocked(double n, double* value, double* top_n, double* top_s) const;
  bool LargestUpToLocked(double n, double* at_n, double* at_s) const;

  mutable std::mutex mu_;
  std::array<double, 16> size_{}, seconds_{};  // 0 size: nothing measured in the bin
  std::array<int32_t, 16> count_{};            // observations per bin (up to 10 counted)
  std::array<double, 16> floor_{};             // the bin's fastest step, drifting up
};

}  // namespace tarmac::metrics
