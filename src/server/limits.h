// Admission limits of the HTTP server: a per-tenant token-bucket rate limiter and the
// admission queue (max concurrent generation requests, bounded waiting queue in requests and
// tokens).
//
// Not thread-safe: both are owned and used by the server's single I/O thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tarmac::server {

// Classic token bucket: `rate` tokens per second refill up to `burst`; Take(now) spends one.
class TokenBucket {
 public:
  TokenBucket(double rate, double burst) : rate_(rate), burst_(burst), tokens_(burst) {}
  // True (and one token spent) if a token is available at time `now_s`.
  bool Take(double now_s);
  // Seconds until one token will be available (0 if one is now).
  double WaitSeconds(double now_s);

 private:
  void Refill(double now_s);
  double rate_, burst_, tokens_;
  double last_s_ = -1;
};

// One bucket per tenant (created on first use). rate <= 0 disables limiting.
class RateLimiter {
 public:
  RateLimiter(double rate_per_s, double burst) : rate_(rate_per_s), burst_(burst < 1 ? 1 : burst) {}
  bool enabled() const { return rate_ > 0; }
  // True when the tenant may proceed; else *retry_after_s says when to retry (>= 1).
  bool Allow(const std::string& tenant, double now_s, int* retry_after_s);

 private:
  double rate_, burst_;
  std::unordered_map<std::string, TokenBucket> buckets_;
};

struct AdmissionConfig {
  int32_t max_concurrent = 256;        // generation requests in the engines at once
  int32_t max_queue = 1024;            // requests waiting for a slot
  int64_t max_queue_tokens = 1 << 22;  // prompt + max_tokens of waiting requests
};

class Admission {
 public:
  enum class Decision { kRun, kQueued, kRejected };
  explicit Admission(AdmissionConfig c) : c_(c) {}

  // A new request with `tokens` (prompt + max_tokens) and a priority (smaller first).
  Decision Arrive(int64_t id, int64_t tokens, int32_t priority);
  // A running request finished: returns queued requests that may start now (in order).
  std::vector<int64_t> Finish(int64_t id);
  // A queued request gave up (client gone, timeout) before it started.
  void Withdraw(int64_t id);

  int32_t running() const { return static_cast<int32_t>(running_.size()); }
  int32_t queued() const { return static_cast<int32_t>(queue_.size()); }
  int64_t queued_tokens() const { return queued_tokens_; }
  const AdmissionConfig& config() const { return c_; }

 private:
  AdmissionConfig c_;
  std::set<int64_t> running_;
  std::set<std::tuple<int32_t, int64_t, int64_t>> queue_;  // (priority, seq, id)
  std::map<int64_t, std::tuple<int32_t, int64_t, int64_t>> queued_by_id_;  // id -> key, tokens in seq slot
  std::map<int64_t, int64_t> queued_tokens_by_id_;
  int64_t queued_tokens_ = 0;
  int64_t seq_ = 0;
};

}  // namespace tarmac::server
