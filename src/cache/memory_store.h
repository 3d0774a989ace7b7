// MemoryStore: the embedded Store. Entries live in this process under a byte budget (keys +
// values + a fixed per-entry overhead): a Put that would exceed it evicts least recently used
// entries first; expired entries are dropped when touched and by a sweep on every Put.
//
// Thread-safe (one mutex; every operation is O(log n) in the entries, ErasePrefix O(log n + k)).
#pragma once

#include <list>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "cache/store.h"

namespace tarmac::cache {

class MemoryStore final : public Store {
 public:
  static constexpr int64_t kEntryOverhead = 96;  // bytes counted per entry beyond key and value

  // Preconditions: max_bytes >= 1. `now` is the clock TTLs are measured on (seconds).
  explicit MemoryStore(int64_t max_bytes, double (*now)() = nullptr);

  Result<std::optional<std::string>> Get(const std::string& key) override;
  Status Put(const std::string& key, const std::string& value, double ttl_s) override;
  Result<bool> Erase(const std::string& key) override;
  Result<int64_t> ErasePrefix(const std::string& prefix) override;
  StoreStats stats() const override;
  const char* name() const override { return "memory"; }
  bool blocking() const override { return false; }

  int64_t max_bytes() const { return max_bytes_; }
  // The byte count, LRU list and expiry order agree with the entries; bytes <= budget.
  Status CheckIntegrity() const;

 private:
  struct Entry;
  using Map = std::map<std::string, Entry, std::less<>>;
  struct Entry {
    std::string value;
    double expires = 0;
    std::list<Map::iterator>::iterator lru;  // position in lru_ (front: most recent)
  };
  static int64_t Cost(const std::string& key, const std::string& value) {
    return static_cast<int64_t>(key.size() + value.size()) + kEntryOverhead;
  }
  void RemoveLocked(Map::iterator it);
  void SweepLocked(double now);

  const int64_t max_bytes_;
  double (*const now_)();
  mutable std::mutex mu_;
  Map map_;
  std::list<Map::iterator> lru_;
  std::set<std::pair<double, std::string>> by_expiry_;
  int64_t bytes_ = 0;
  int64_t evictions_ = 0, expirations_ = 0;
};

}  // namespace tarmac::cache
