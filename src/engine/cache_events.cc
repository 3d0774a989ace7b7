#include "engine/cache_events.h"

#include <algorithm>

#include "base/check.h"

namespace tarmac::engine {

CacheEventQueue::CacheEventQueue(size_t capacity) : capacity_(capacity) { TARMAC_CHECK(capacity >= 1); }

int64_t CacheEventQueue::Push(std::vector<prefix::BlockEvent>* events) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t dropped = 0;
  for (prefix::BlockEvent& e : *events) {
    if (q_.size() >= capacity_) {
      ++dropped;
      continue;
    }
    q_.push_back(std::move(e));
  }
  events->clear();
  dropped_ += dropped;
  return dropped;
}

std::vector<prefix::BlockEvent> CacheEventQueue::Drain(size_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = std::min(max, q_.size());
  std::vector<prefix::BlockEvent> out(std::make_move_iterator(q_.begin()),
                                      std::make_move_iterator(q_.begin() + static_cast<std::ptrdiff_t>(n)));
  q_.erase(q_.begin(), q_.begin() + static_cast<std::ptrdiff_t>(n));
  return out;
}

int64_t CacheEventQueue::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

size_t CacheEventQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return q_.size();
}

}  // namespace tarmac::engine
