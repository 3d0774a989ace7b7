#include "engine/expert_load.h"

#include <algorithm>
#include <functional>

#include "base/check.h"

namespace tarmac::engine {

ExpertLoadWindow::ExpertLoadWindow(int32_t n_layer, int32_t n_expert, double window_s,
                                   double every_s)
    : n_layer_(n_layer), n_expert_(n_expert), window_s_(window_s), every_s_(every_s) {
  TARMAC_CHECK(n_layer >= 1 && n_expert >= 1 && every_s > 0 && window_s >= every_s);
}

ExpertLoad ExpertLoadWindow::Observe(double now_s, const std::vector<int64_t>& counts) {
  TARMAC_CHECK(counts.size() == static_cast<size_t>(n_layer_) * n_expert_);
  std::lock_guard<std::mutex> lock(mu_);
  if (snapshots_.empty() || now_s - snapshots_.back().first >= every_s_) {
    snapshots_.emplace_back(now_s, counts);
  }
  // The window starts at the newest snapshot at least window_s old (older ones are dropped),
  // or at the oldest one; at load when that is the one just taken.
  while (snapshots_.size() >= 2 && now_s - snapshots_[1].first >= window_s_) snapshots_.pop_front();
  const std::vector<int64_t>* start =
      snapshots_.front().first < now_s ? &snapshots_.front().second : nullptr;
  std::vector<int64_t> window(counts);
  if (start != nullptr) {
    for (size_t i = 0; i < window.size(); ++i) window[i] -= (*start)[i];
  }
  return Of(window, n_layer_, n_expert_);
}

ExpertLoad ExpertLoadWindow::Of(const std::vector<int64_t>& w, int32_t n_layer, int32_t n_expert) {
  TARMAC_CHECK(w.size() == static_cast<size_t>(n_layer) * n_expert);
  ExpertLoad out;
  const int32_t hot = std::max(1, (n_expert + 9) / 10);
  int32_t layers = 0;
  std::vector<int64_t> row(n_expert);
  for (int32_t l = 0; l < n_layer; ++l) {
    std::copy(w.begin() + static_cast<int64_t>(l) * n_expert,
              w.begin() + static_cast<int64_t>(l + 1) * n_expert, row.begin());
    int64_t total = 0;
    for (int64_t c : row) total += c;
    if (total == 0) continue;
    out.routed += total;
    ++layers;
    std::partial_sort(row.begin(), row.begin() + hot, row.end(), std::greater<int64_t>());
    int64_t hot_tokens = 0;
    for (int32_t i = 0; i < hot; ++i) hot_tokens += row[i];
    out.max_over_mean += static_cast<double>(row[0]) * n_expert / static_cast<double>(total);
    out.hot_share += static_cast<double>(hot_tokens) / static_cast<double>(total);
  }
  if (layers > 0) {
    out.max_over_mean /= layers;
    out.hot_share /= layers;
  }
  return out;
}

}  // namespace tarmac::engine
