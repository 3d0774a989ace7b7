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

bool RateLimiter::Allow(const std::string& tenant, double now_s, int* retry_after_s) {
  if (!enabled()) return true;
  auto it = buckets_.try_emplace(tenant, rate_, burst_).first;
  if (it->second.Take(now_s)) return true;
  *retry_after_s = std::max(1, static_cast<int>(std::ceil(it->second.WaitSeconds(now_s))));
  return false;
}

Admission::Decision Admission::Arrive(int64_t id, int64_t tokens, int32_t priority) {
  if (running() < c_.max_concurrent && queue_.empty()) {
    running_.insert(id);
    return Decision::kRun;
  }
  if (queued() >= c_.max_queue || queued_tokens_ + tokens > c_.max_queue_tokens) return Decision::kRejected;
  auto key = std::make_tuple(priority, seq_++, id);
  queue_.insert(key);
  queued_by_id_[id] = key;
  queued_tokens_by_id_[id] = tokens;
  queued_tokens_ += tokens;
  return Decision::kQueued;
}

std::vector<int64_t> Admission::Finish(int64_t id) {
  running_.erase(id);
  std::vector<int64_t> start;
  while (running() < c_.max_concurrent && !queue_.empty()) {
    const int64_t next = std::get<2>(*queue_.begin());
    Withdraw(next);
    running_.insert(next);
    start.push_back(next);
  }
  return start;
}

void Admission::Withdraw(int64_t id) {
  auto it = queued_by_id_.find(id);
  if (it == queued_by_id_.end()) return;
  queue_.erase(it->second);
  queued_by_id_.erase(it);
  auto t = queued_tokens_by_id_.find(id);
  queued_tokens_ -= t->second;
  queued_tokens_by_id_.erase(t);
}

}  // namespace tarmac::server
