#include "cache/memory_store.h"

#include "base/check.h"
#include "base/clock.h"

namespace tarmac::cache {

MemoryStore::MemoryStore(int64_t max_bytes, double (*now)()) : max_bytes_(max_bytes), now_(now ? now : &NowSeconds) {
  TARMAC_CHECK(max_bytes >= 1);
}

void MemoryStore::RemoveLocked(Map::iterator it) {
  bytes_ -= Cost(it->first, it->second.value);
  by_expiry_.erase({it->second.expires, it->first});
  lru_.erase(it->second.lru);
  map_.erase(it);
}

void MemoryStore::SweepLocked(double now) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    RemoveLocked(map_.find(by_expiry_.begin()->second));
    ++expirations_;
  }
}

Result<std::optional<std::string>> MemoryStore::Get(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return std::optional<std::string>();
  if (it->second.expires <= now_()) {
    RemoveLocked(it);
    ++expirations_;
    return std::optional<std::string>();
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return std::optional<std::string>(it->second.value);
}

Status MemoryStore::Put(const std::string& key, const std::string& value, double ttl_s) {
  TARMAC_CHECK(ttl_s > 0);
  const int64_t cost = Cost(key, value);
  if (cost > max_bytes_)
    return InvalidArgument("a cache entry of {} bytes exceeds the store's budget of {} bytes", cost, max_bytes_);
  std::lock_guard<std::mutex> l(mu_);
  const double now = now_();
  SweepLocked(now);
  if (auto it = map_.find(key); it != map_.end()) RemoveLocked(it);
  while (bytes_ + cost > max_bytes_) {
    RemoveLocked(lru_.back());
    ++evictions_;
  }
  auto [it, inserted] = map_.emplace(key, Entry{value, now + ttl_s, {}});
  TARMAC_DCHECK(inserted);
  lru_.push_front(it);
  it->second.lru = lru_.begin();
  by_expiry_.insert({it->second.expires, key});
  bytes_ += cost;
  return Status::Ok();
}

Result<bool> MemoryStore::Erase(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  RemoveLocked(it);
  return true;
}

Result<int64_t> MemoryStore::ErasePrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> l(mu_);
  int64_t n = 0;
  for (auto it = map_.lower_bound(prefix); it != map_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    auto next = std::next(it);
    RemoveLocked(it);
    it = next;
    ++n;
  }
  return n;
}

StoreStats MemoryStore::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  StoreStats s;
  s.entries = static_cast<int64_t>(map_.size());
  s.bytes = bytes_;
  s.evictions = evictions_;
  s.expirations = expirations_;
  return s;
}

Status MemoryStore::CheckIntegrity() const {
  std::lock_guard<std::mutex> l(mu_);
  int64_t bytes = 0;
  for (const auto& [k, e] : map_) {
    bytes += Cost(k, e.value);
    if ((*e.lru)->first != k) return Internal("memory store: '{}' points at another LRU entry", k);
    if (!by_expiry_.count({e.expires, k})) return Internal("memory store: '{}' is missing from the expiry order", k);
  }
  if (bytes != bytes_) return Internal("memory store: {} bytes counted, {} held", bytes_, bytes);
  if (lru_.size() != map_.size() || by_expiry_.size() != map_.size())
    return Internal("memory store: {} entries, {} in the LRU list, {} in the expiry order", map_.size(), lru_.size(),
                    by_expiry_.size());
  if (bytes_ > max_bytes_) return Internal("memory store: {} bytes held over a budget of {}", bytes_, max_bytes_);
  return Status::Ok();
}

}  // namespace tarmac::cache
