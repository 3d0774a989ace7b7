// CacheService: the scoped caches of one server: one Store per cache (response, retrieval,
// tool, session), embedded or on a shared Redis, their limits, the worker that runs blocking
// store calls off the I/O thread, the server's namespace secret, and the caches' metric
// series: lookups, hits, what hits saved (prefill and decode tokens, seconds estimated from
// the answering model's measured step costs) per cache and request bucket; bytes, entries,
// evictions, expirations and errors per cache.
//
// Thread-safe. Submit runs a job inline when the stores do not block (memory) and on the worker
// thread otherwise; the job reports back itself (the server posts to its I/O thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/work_queue.h"
#include "cache/store.h"
#include "metrics/registry.h"

namespace tarmac::cache {

enum class CacheKind { kResponse, kRetrieval, kTool, kSession };
inline constexpr int kNumCacheKinds = 4;
const char* CacheKindName(CacheKind k);  // "response", "retrieval", "tool", "session"

struct CacheLimits {
  int64_t max_bytes = 64ll << 20;       // memory backend: this cache's budget
  double default_ttl_s = 3600;          // entries that name no TTL
  double max_ttl_s = 86400;             // a TTL asked for beyond this is refused (400)
  int64_t max_entry_bytes = 256 << 10;  // one value (response: the recorded response)
};

struct CacheConfig {
  enum class Backend { kMemory, kRedis };
  Backend backend = Backend::kMemory;
  std::string redis_url;                 // kRedis: redis://host:port/db
  std::string secret;                    // HMAC key of prefix namespaces; "" : random per start
  CacheLimits response{256ll << 20, 300, 86400, 4 << 20};
  CacheLimits retrieval;
  CacheLimits tool;
  CacheLimits session{16ll << 20, 1800, 86400, 64 << 10};  // state objects; also the KV pin TTL
  int64_t session_max_blocks = 1024;     // KV blocks a tenant's sessions keep pinned, per model
  int32_t worker_queue = 4096;           // blocking stores: jobs waiting at most (then: a miss)

  const CacheLimits& limits(CacheKind k) const;
  // Sizes >= 1, TTLs > 0 and default <= max, a Redis URL that parses. Errors name the field
  // ("cache.response.max_ttl_s").
  Status Validate() const;
};

class CacheService {
 public:
  // Errors: an invalid config (Validate). A Redis that is down is not an error: its caches
  // miss until it comes back.
  static Result<std::unique_ptr<CacheService>> Create(CacheConfig config, std::shared_ptr<metrics::Registry> registry);
  ~CacheService();  // finishes queued jobs, then stops the worker
  CacheService(const CacheService&) = delete;
  CacheService& operator=(const CacheService&) = delete;

  const CacheConfig& config() const { return config_; }
  const std::string& secret() const { return secret_; }
  Store& store(CacheKind k) { return *stores_[static_cast<size_t>(k)]; }
  bool blocking() const { return blocking_; }

  // Runs job inline (memory) or on the worker (Redis). False when the worker's queue is full:
  // the job did not run (count a miss).
  bool Submit(std::function<void()> job);

  // Metrics. bucket: the request's (metrics::kNoBucket for retrieval and tool entries).
  void CountLookup(CacheKind k, metrics::BucketId bucket, bool hit);
  void CountSaved(CacheKind k, metrics::BucketId bucket, int64_t prefill_tokens, int64_t decode_tokens, double seconds);
  void CountError(CacheKind k);

 private:
  CacheService(CacheConfig config, std::shared_ptr<metrics::Registry> registry);
  metrics::LabelValues Labels(CacheKind k, metrics::BucketId bucket) const;

  const CacheConfig config_;
  std::string secret_;
  std::shared_ptr<metrics::Registry> registry_;
  std::vector<std::shared_ptr<Store>> stores_;  // [kNumCacheKinds]; Redis: one shared
  bool blocking_ = false;
  metrics::Family<metrics::Counter>* lookups_ = nullptr;
  metrics::Family<metrics::Counter>* hits_ = nullptr;
  metrics::Family<metrics::Counter>* prefill_saved_ = nullptr;
  metrics::Family<metrics::Counter>* decode_saved_ = nullptr;
  metrics::Family<metrics::Counter>* seconds_saved_ = nullptr;
  metrics::Family<metrics::Counter>* errors_ = nullptr;
  std::vector<metrics::CallbackHandle> store_series_;

  std::unique_ptr<WorkQueue> worker_;  // blocking stores only: one thread, finishes its queue
};

}  // namespace tarmac::cache
