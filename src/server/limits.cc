#include "server/limits.h"

#include <algorithm>
#include <cmath>

namespace tarmac::server {

void TokenBucket::Refill(double now_s) {
  if (last_s_ >= 0 && now_s > last_s_) tokens_ = std::min(burst_, tokens_ + (now_s - last_s_) * rate_);
  if (now_s > last_s_) last_s_ = now_s;
}

bool TokenBucket::Take(double now_s) {
  Refill(now_s);
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  return false;
}

double TokenBucket::WaitSeconds(double now_s) {
  Refill(now_s);
  return tokens_ >= 1.0 ? 0.0 : (1.0 - tokens_) / rate_;
}

void TokenBucket::Spend(double now_s, double n) {
  Refill(now_s);
  tokens_ -= n;
}

double TokenBucket::Level(double now_s) {
  Refill(now_s);
  return tokens_;
}

bool RateLimiter::Allow(const std::string& tenant, double now_s, int* retry_after_s) {
  if (!enabled()) return true;
  auto it = buckets_.try_emplace(tenant, rate_, burst_).first;
  if (it->second.Take(now_s)) return true;
  *retry_after_s = std::max(1, static_cast<int>(std::ceil(it->second.WaitSeconds(now_s))));
  return false;
}

}  // namespace tarmac::server
