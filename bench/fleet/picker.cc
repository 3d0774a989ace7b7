#include "fleet/picker.h"

#include <algorithm>
#include <chrono>

#include "base/check.h"
#include "fleet/http_client.h"
#include "kvevents/follower.h"

namespace tarmac::bench {

uint64_t RequestKey(uint64_t parent, const int32_t* tokens, int32_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ull;
  };
  mix(parent, 8);
  for (int32_t i = 0; i < n; ++i) mix(static_cast<uint32_t>(tokens[i]), 4);
  return h;
}

StandInPicker::StandInPicker(std::vector<ReplicaAddress> replicas, PickerWeights w, int32_t block_size, uint64_t seed)
    : replicas_(std::move(replicas)), w_(w), block_size_(block_size), per_(replicas_.size()), load_(replicas_.size()),
      rng_(seed) {
  TARMAC_CHECK(!replicas_.empty() && replicas_.size() <= kMaxReplicas && block_size >= 1);
}

StandInPicker::~StandInPicker() { Stop(); }

Status StandInPicker::Start() {
  for (int r = 0; r < static_cast<int>(replicas_.size()); ++r) threads_.emplace_back([this, r] { Follow(r); });
  threads_.emplace_back([this] { Scrape(); });
  for (int i = 0; i < 500 && connected_.load() < static_cast<int>(replicas_.size()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::lock_guard<std::mutex> lock(mu_);
  return start_error_;
}

void StandInPicker::Stop() {
  stop_ = true;
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void StandInPicker::Follow(int r) {
  auto f = kvevents::Follower::Connect(replicas_[r].events, replicas_[r].replay, "kv@");
  if (!f.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    start_error_ = f.status();
    ++connected_;
    return;
  }
  ++connected_;
  auto apply = [&](const kvevents::Message& m) { ApplyBatch(r, m.batch); };
  while (!stop_) {
    auto n = (*f)->Pump(std::chrono::milliseconds(20), apply);
    if (!n.ok()) std::fprintf(stderr, "picker: replica %d: %s\n", r, n.status().message().c_str());
    std::lock_guard<std::mutex> lock(mu_);
    PerReplica& p = per_[static_cast<size_t>(r)];
    p.lost = (*f)->lost();
    p.gaps = (*f)->gaps_filled();
    p.restarts = (*f)->restarts();
  }
}

void StandInPicker::ApplyBatch(int r, const kvevents::WireBatch& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.messages;
  PerReplica& p = per_[static_cast<size_t>(r)];
  auto drop = [&](uint64_t request_key) {
    auto it = index_.find(request_key);
    if (it == index_.end() || it->second[static_cast<size_t>(r)] == 0) return;
    if (--it->second[static_cast<size_t>(r)] == 0 &&
        std::all_of(it->second.begin(), it->second.end(), [](uint16_t c) { return c == 0; }))
      index_.erase(it);
  };
  for (const kvevents::WireEvent& e : batch.events) {
    switch (e.kind) {
      case kvevents::WireEvent::Kind::kCleared:
        for (const auto& [ek, rk] : p.engine_to_request) drop(rk);
        p.engine_to_request.clear();
        break;
      case kvevents::WireEvent::Kind::kStored: {
        uint64_t parent = 0;  // llm-d's empty parent
        if (e.parent) {
          auto it = p.engine_to_request.find(*e.parent);
          if (it == p.engine_to_request.end()) break;  // unknown parent: skipped, as llm-d does
          parent = it->second;
        }
        for (size_t i = 0; i < e.hashes.size(); ++i) {
          const uint64_t rk = RequestKey(parent, e.tokens.data() + i * static_cast<size_t>(e.block_size), e.block_size);
          if (p.engine_to_request.emplace(e.hashes[i], rk).second) ++index_[rk][static_cast<size_t>(r)];
          parent = rk;
        }
        break;
      }
      case kvevents::WireEvent::Kind::kRemoved:
        for (uint64_t h : e.hashes) {
          auto it = p.engine_to_request.find(h);
          if (it == p.engine_to_request.end()) continue;
          drop(it->second);
          p.engine_to_request.erase(it);
        }
        break;
    }
  }
}


void StandInPicker::Scrape() {
  while (!stop_) {
    for (size_t r = 0; r < replicas_.size(); ++r) {
      HttpReply m = HttpRequest(replicas_[r].http_port, "GET", "/metrics");
      if (m.status != 200) continue;
      const double waiting = FirstSample(m.body, "vllm:num_requests_waiting"), usage = FirstSample(m.body, "vllm:kv_cache_usage_perc");
      if (waiting < 0 || usage < 0) {
        std::fprintf(stderr, "picker: replica %zu's /metrics lacks the vllm: gauges (--metrics-names vllm)\n", r);
        continue;
      }
      Load l{waiting, usage};
      std::lock_guard<std::mutex> lock(mu_);
      load_[r] = l;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<int> StandInPicker::PrefixBlocksLocked(const std::vector<int32_t>& prompt) const {
  const size_t n = replicas_.size();
  std::vector<int> prefix(n, 0);
  // Longest run of leading blocks per replica.
  std::vector<bool> active(n, true);
  uint64_t parent = 0;
  for (size_t b = 0; (b + 1) * static_cast<size_t>(block_size_) <= prompt.size(); ++b) {
    parent = RequestKey(parent, prompt.data() + b * static_cast<size_t>(block_size_), block_size_);
    auto it = index_.find(parent);
    bool any = false;
    for (size_t r = 0; r < n; ++r) {
      active[r] = active[r] && it != index_.end() && it->second[r] > 0;
      if (active[r]) ++prefix[r], any = true;
    }
    if (!any) break;
  }
  return prefix;
}

std::vector<int> StandInPicker::PrefixBlocks(const std::vector<int32_t>& prompt) const {
  std::lock_guard<std::mutex> lock(mu_);
  return PrefixBlocksLocked(prompt);
}

int StandInPicker::Pick(const std::vector<int32_t>& prompt) {
  const size_t n = replicas_.size();
  std::vector<double> score(n, 0);
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<int> blocks = PrefixBlocksLocked(prompt);
  const std::vector<double> prefix(blocks.begin(), blocks.end());
  auto minmax = [&](const std::vector<double>& v, bool higher_is_better, double all_equal) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    std::vector<double> out(n, all_equal);
    if (*hi > *lo)
      for (size_t r = 0; r < n; ++r) out[r] = higher_is_better ? (v[r] - *lo) / (*hi - *lo) : (*hi - v[r]) / (*hi - *lo);
    return out;
  };
  std::vector<double> waiting(n);
  for (size_t r = 0; r < n; ++r) waiting[r] = load_[r].waiting;
  const std::vector<double> p = minmax(prefix, true, 0.0), q = minmax(waiting, false, 1.0);
  for (size_t r = 0; r < n; ++r) score[r] = w_.prefix * p[r] + w_.queue * q[r] + w_.kv * (1.0 - load_[r].usage);
  const double best = *std::max_element(score.begin(), score.end());
  std::vector<int> ties;
  for (size_t r = 0; r < n; ++r)
    if (score[r] >= best - 1e-9) ties.push_back(static_cast<int>(r));
  return ties[rng_() % ties.size()];
}

StandInPicker::Stats StandInPicker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  for (const PerReplica& p : per_) {
    s.lost += p.lost;
    s.gaps += p.gaps;
    s.restarts += p.restarts;
  }
  s.keys = index_.size();
  return s;
}

}  // namespace tarmac::bench
