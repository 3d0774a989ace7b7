// Store: the key-value tier under every scoped cache (responses, retrieval and tool results,
// session state). Keys are built by the caches (cache_keys.h) and carry the scope; a Store
// knows nothing of scopes, only bytes, TTLs and key prefixes (a prefix groups a tenant's or a
// scope's entries, for invalidation).
//
// Implementations: MemoryStore (embedded: byte budget, LRU, TTL) and RedisStore (shared by a
// fleet's replicas). Every method is thread-safe. An unavailable backend answers with an error
// (never blocks past its timeout): callers treat it as a miss, count it, and serve the request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace tarmac::cache {

struct StoreStats {
  int64_t entries = -1;     // -1: the backend does not say
  int64_t bytes = -1;       // keys + values held (-1: not known here)
  int64_t evictions = 0;    // entries dropped for the byte budget
  int64_t expirations = 0;  // entries dropped when their TTL ran out (those seen here)
  int64_t errors = 0;       // operations that failed (backend unreachable, protocol errors)
};

class Store {
 public:
  virtual ~Store() = default;
  // The value under key, or nullopt (absent or expired). Errors: the backend failed.
  virtual Result<std::optional<std::string>> Get(const std::string& key) = 0;
  // Stores value under key for ttl_s seconds (> 0), replacing any previous value. Errors: the
  // backend failed, or the entry alone exceeds the store's budget.
  virtual Status Put(const std::string& key, const std::string& value, double ttl_s) = 0;
  // Removes key; whether it was there.
  virtual Result<bool> Erase(const std::string& key) = 0;
  // Removes every key starting with prefix; how many.
  virtual Result<int64_t> ErasePrefix(const std::string& prefix) = 0;
  virtual StoreStats stats() const = 0;
  virtual const char* name() const = 0;  // "memory", "redis"
  // Whether operations may block on I/O (then callers run them off the I/O thread).
  virtual bool blocking() const = 0;
};

}  // namespace tarmac::cache
