// ExpertLoadWindow: how evenly a mixture-of-experts model's router spreads tokens over its
// experts in the last `window` seconds, from the model's cumulative per-(layer, expert) token
// counts (model::LlamaModel::ExpertTokenCounts), without a series per expert and layer:
//   max_over_mean: per layer, the busiest expert's tokens over the mean per expert, averaged
//                  over layers (1: perfectly even; n_expert / n_used at worst);
//   hot_share:     per layer, the share of routed tokens that went to the hottest 10% of the
//                  experts (at least one), averaged over layers (0.1 when even).
// The window is measured between snapshots taken at least `every` seconds apart; with none
// old enough yet, it starts at load (counts zero).
//
// Thread-safe (one mutex): Observe is called by whoever reads the metrics.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

namespace tarmac::engine {

struct ExpertLoad {
  double max_over_mean = 0;  // 0 when no token was routed in the window
  double hot_share = 0;
  int64_t routed = 0;        // (token, expert) choices in the window, all layers
};

class ExpertLoadWindow {
 public:
  // Preconditions: n_layer, n_expert >= 1; window_s >= every_s > 0.
  ExpertLoadWindow(int32_t n_layer, int32_t n_expert, double window_s = 60, double every_s = 5);

  // counts: cumulative [n_layer][n_expert] at now_s (non-decreasing between calls).
  ExpertLoad Observe(double now_s, const std::vector<int64_t>& counts);

  // The statistics of one window's per-(layer, expert) counts ([n_layer][n_expert]).
  static ExpertLoad Of(const std::vector<int64_t>& window_counts, int32_t n_layer, int32_t n_expert);

 private:
  const int32_t n_layer_, n_expert_;
  const double window_s_, every_s_;
  std::mutex mu_;
  std::deque<std::pair<double, std::vector<int64_t>>> snapshots_;  // oldest first
};

}  // namespace tarmac::engine
