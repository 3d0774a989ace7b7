// The HTTP server's per-tenant rate limiter: a token bucket per tenant. (How many requests run
// and wait per model is router::Admission.)
//
// Not thread-safe: owned and used by the server's single I/O thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace tarmac::server {

// Classic token bucket: `rate` tokens per second refill up to `burst`; Take(now) spends one.
class TokenBucket {
 public:
  TokenBucket(double rate, double burst) : rate_(rate), burst_(burst), tokens_(burst) {}
  // True (and one token spent) if a token is available at time `now_s`.
  bool Take(double now_s);
  // Seconds until one token will be available (0 if one is now).
  double WaitSeconds(double now_s);
  // Spends n tokens whatever the level (it may go negative: a debt the refill pays back).
  void Spend(double now_s, double n);
  // The level at `now_s` (negative while in debt).
  double Level(double now_s);
  double rate() const { return rate_; }
  double burst() const { return burst_; }

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

}  // namespace tarmac::server
