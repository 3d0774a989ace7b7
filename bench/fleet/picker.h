// StandInPicker: a stand-in for llm-d's endpoint picker, which cannot run here, written from
// llm-d's documentation (llm-d-kv-cache's indexer and scorer, the inference scheduler's
// plugins) for the fleet benchmark. It is not the real picker; it decides the way that one is
// documented to:
//   - precise prefix-cache scorer: an index of which replica holds which block, fed by each
//     replica's KV events (kvevents::Follower). Blocks are keyed the picker's own way, as
//     llm-d's "request keys": a chained hash of the parent's key and the block's token ids,
//     computed from the token ids in BlockStored (so the engines' hashes stay opaque; the
//     engine key -> request key map resolves removals and parents). A request's score on a
//     replica: how many of its leading full blocks the replica holds, min-max normalised over
//     the replicas.
//   - queue scorer: vllm:num_requests_waiting, min-max normalised (1 for the shortest queue;
//     all 1 when equal), scraped every 50 ms like the picker.
//   - KV-cache utilisation scorer: 1 - vllm:kv_cache_usage_perc.
//   - max-score picker over the weighted sum, ties broken at random.
// One deviation, stated: AllBlocksCleared forgets the replica's blocks (llm-d logs it).
//
// Owns one follower thread per replica and a scraper thread. Thread-safety: Pick and Stats
// may be called from any thread (one mutex over the index and the scraped load).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace tarmac::kvevents {
struct WireBatch;
}

namespace tarmac::bench {

struct ReplicaAddress {
  int http_port = 0;
  std::string events, replay;  // ZeroMQ endpoints
};

struct PickerWeights {
  double prefix = 3, queue = 2, kv = 2;  // llm-d's precise-prefix-cache guide's weights
};

class StandInPicker {
 public:
  static constexpr int kMaxReplicas = 8;
  // Preconditions: 1..kMaxReplicas replicas; block_size the replicas' (asserted).
  StandInPicker(std::vector<ReplicaAddress> replicas, PickerWeights w, int32_t block_size, uint64_t seed);
  ~StandInPicker();  // Stop()

  // Connects the followers and starts the threads. Errors name the endpoint.
  Status Start();
  void Stop();

  // The replica for a request of these prompt token ids.
  int Pick(const std::vector<int32_t>& prompt);

  // Per replica, how many of the prompt's leading full blocks the index says it holds (the
  // precise prefix scorer's raw score, before normalisation).
  std::vector<int> PrefixBlocks(const std::vector<int32_t>& prompt) const;

  struct Stats {
    int64_t messages = 0, lost = 0, gaps = 0, restarts = 0;
    size_t keys = 0;  // request keys held by any replica
  };
  Stats stats() const;

 private:
  struct Load {
    double waiting = 0, usage = 0;
  };
  struct PerReplica {
    std::unordered_map<uint64_t, uint64_t> engine_to_request;  // engine key -> request key
    int64_t lost = 0, gaps = 0, restarts = 0;                   // its follower's counters
  };
  void Follow(int r);
  void Scrape();
  void ApplyBatch(int r, const kvevents::WireBatch& batch);
  std::vector<int> PrefixBlocksLocked(const std::vector<int32_t>& prompt) const;  // mu_ held

  const std::vector<ReplicaAddress> replicas_;
  const PickerWeights w_;
  const int32_t block_size_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::array<uint16_t, kMaxReplicas>> index_;  // request key -> blocks per replica
  std::vector<PerReplica> per_;
  std::vector<Load> load_;
  std::mt19937_64 rng_;
  Stats stats_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::atomic<int> connected_{0};
  Status start_error_;
};

// The picker's own block key: FNV-1a over the parent key and the token ids.
uint64_t RequestKey(uint64_t parent, const int32_t* tokens, int32_t n);

}  // namespace tarmac::bench
