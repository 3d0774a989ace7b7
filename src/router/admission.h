// Admission: how many generation requests run in the engines at once and how many wait, per
// model and in total. A request for model M runs at once when both M and the whole pool have a
// free slot and nothing of M waits ahead of it; otherwise it waits in M's queue, unless that
// queue or the total queue is full (requests or prompt + max_tokens tokens): rejected. When a
// request ends, waiting requests start, the most important first (priority class, then
// arrival) among the models that have room.
//
// Not thread-safe: the server's I/O thread owns it; queued(model) may be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tarmac::router {

struct AdmissionLimits {
  int32_t max_concurrent = 256;        // generation requests in the engines at once
  int32_t max_queue = 1024;            // requests waiting for a slot
  int64_t max_queue_tokens = 1 << 22;  // prompt + max_tokens of waiting requests
};

class Admission {
 public:
  enum class Decision { kRun, kQueued, kRejected };
  explicit Admission(AdmissionLimits totals) : totals_(totals) {}

  // Limits of one model's share (default: the totals). Call before its first request.
  void SetModelLimits(const std::string& model, AdmissionLimits limits);

  // A new request `id` for `model` with `tokens` (prompt + max_tokens) and a priority.
  Decision Arrive(const std::string& model, int64_t id, int64_t tokens, int32_t priority);
  // A running request finished: the queued requests that start now, in order.
  std::vector<int64_t> Finish(int64_t id);
  // A queued request gave up (client gone, timeout) before it started.
  void Withdraw(int64_t id);
  // A running request now runs on `model` (a cascade escalated it): its slot moves there,
  // whatever that model's limit (the request was admitted once already). Returns the queued
  // requests that start in the slot it left.
  std::vector<int64_t> Transfer(int64_t id, const std::string& model);

  int32_t running() const { return running_total_; }
  int32_t queued() const { return static_cast<int32_t>(queued_.size()); }
  int64_t queued_tokens() const { return queued_tokens_; }
  int32_t running(const std::string& model) const;
  // Thread-safe.
  int32_t queued(const std::string& model) const;
  const AdmissionLimits& totals() const { return totals_; }

 private:
  using Key = std::tuple<int32_t, int64_t, int64_t>;  // (priority, arrival, id)
  struct Model {
    AdmissionLimits limits;
    int32_t running = 0;
    std::set<Key> queue;
    int64_t queued_tokens = 0;
    std::atomic<int32_t> queued{0};  // queue.size(), for readers on other threads
  };
  struct Entry {
    Model* model;
    bool running;
    Key key;
    int64_t tokens;
  };
  Model& At(const std::string& model);
  void Start(int64_t id, Entry& e);
  std::vector<int64_t> StartWaiting();  // while there is room: the most important queued first

  AdmissionLimits totals_;
  std::map<std::string, std::unique_ptr<Model>, std::less<>> models_;
  std::unordered_map<int64_t, Entry> entries_;
  std::set<int64_t> queued_;  // ids waiting, any model
  int32_t running_total_ = 0;
  int64_t queued_tokens_ = 0;
  int64_t seq_ = 0;
};

}  // namespace tarmac::router
