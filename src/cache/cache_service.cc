#include "cache/cache_service.h"

#include "base/check.h"
#include "base/digest.h"
#include "cache/memory_store.h"
#include "cache/redis_store.h"

namespace tarmac::cache {
namespace {

constexpr CacheKind kKinds[] = {CacheKind::kResponse, CacheKind::kRetrieval, CacheKind::kTool, CacheKind::kSession};

Status CheckLimits(const CacheLimits& l, const std::string& at) {
  if (l.max_bytes < 1) return InvalidField(at + ".max_bytes", "{}.max_bytes must be >= 1, got {}", at, l.max_bytes);
  if (l.max_entry_bytes < 1)
    return InvalidField(at + ".max_entry_bytes", "{}.max_entry_bytes must be >= 1, got {}", at, l.max_entry_bytes);
  if (!(l.default_ttl_s > 0))
    return InvalidField(at + ".ttl_s", "{}.ttl_s must be > 0, got {}", at, l.default_ttl_s);
  if (!(l.max_ttl_s >= l.default_ttl_s))
    return InvalidField(at + ".max_ttl_s", "{}.max_ttl_s ({}) must be >= its ttl_s ({})", at, l.max_ttl_s, l.default_ttl_s);
  return Status::Ok();
}

}  // namespace

const char* CacheKindName(CacheKind k) {
  switch (k) {
    case CacheKind::kResponse: return "response";
    case CacheKind::kRetrieval: return "retrieval";
    case CacheKind::kTool: return "tool";
    case CacheKind::kSession: return "session";
  }
  return "?";
}

const CacheLimits& CacheConfig::limits(CacheKind k) const {
  switch (k) {
    case CacheKind::kResponse: return response;
    case CacheKind::kRetrieval: return retrieval;
    case CacheKind::kTool: return tool;
    case CacheKind::kSession: return session;
  }
  return response;
}

Status CacheConfig::Validate() const {
  for (CacheKind k : kKinds) TARMAC_RETURN_IF_ERROR(CheckLimits(limits(k), std::string("cache.") + CacheKindName(k)));
  if (session_max_blocks < 1)
    return InvalidField("cache.session.max_blocks", "cache.session.max_blocks must be >= 1, got {}", session_max_blocks);
  if (worker_queue < 1) return InvalidField("cache.worker_queue", "cache.worker_queue must be >= 1");
  if (backend == Backend::kRedis) {
    auto o = ParseRedisUrl(redis_url);
    if (!o.ok()) return InvalidField("cache.url", "cache.url: {}", o.status().message());
  }
  return Status::Ok();
}

Result<std::unique_ptr<CacheService>> CacheService::Create(CacheConfig config, std::shared_ptr<metrics::Registry> registry) {
  TARMAC_RETURN_IF_ERROR(config.Validate());
  TARMAC_CHECK(registry != nullptr);
  return std::unique_ptr<CacheService>(new CacheService(std::move(config), std::move(registry)));
}

CacheService::CacheService(CacheConfig config, std::shared_ptr<metrics::Registry> registry)
    : config_(std::move(config)), registry_(std::move(registry)) {
  secret_ = config_.secret.empty() ? RandomBytes(32) : config_.secret;
  if (config_.backend == CacheConfig::Backend::kRedis) {
    auto shared = std::make_shared<RedisStore>(*ParseRedisUrl(config_.redis_url));
    stores_.assign(kNumCacheKinds, shared);
    blocking_ = true;
  } else {
    for (CacheKind k : kKinds) stores_.push_back(std::make_shared<MemoryStore>(config_.limits(k).max_bytes));
  }
  std::vector<std::string> labels = {"cache"};
  for (const std::string& l : metrics::BucketTable::LabelNames()) labels.push_back(l);
  lookups_ = &registry_->Counters("tarmac:cache_lookups_total", "Scoped-cache lookups, per cache and request bucket.", labels);
  hits_ = &registry_->Counters("tarmac:cache_hits_total", "Scoped-cache hits, per cache and request bucket.", labels);
  prefill_saved_ = &registry_->Counters("tarmac:cache_prefill_tokens_saved_total",
                                        "Prompt tokens hits did not prefill, per cache and request bucket.", labels);
  decode_saved_ = &registry_->Counters("tarmac:cache_decode_tokens_saved_total",
                                       "Output tokens hits did not decode, per cache and request bucket.", labels);
  seconds_saved_ = &registry_->Counters(
      "tarmac:cache_seconds_saved_total",
      "Compute seconds hits saved (from the answering model's measured step costs; retrieval and tool: the cost_s "
      "their writers gave), per cache and request bucket.",
      labels);
  errors_ = &registry_->Counters("tarmac:cache_errors_total",
                                 "Cache operations that failed (backend unreachable, bad entries), per cache.", {"cache"});
  auto& bytes = registry_->Gauges("tarmac:cache_bytes", "Bytes a cache holds (embedded backend).", {"cache"});
  auto& entries = registry_->Gauges("tarmac:cache_entries", "Entries a cache holds (embedded backend).", {"cache"});
  auto& evictions = registry_->Counters("tarmac:cache_evictions_total", "Entries evicted for the byte budget.", {"cache"});
  auto& expirations = registry_->Counters("tarmac:cache_expirations_total", "Entries dropped as their TTL ran out.", {"cache"});
  for (CacheKind k : kKinds) {
    Store* s = stores_[static_cast<size_t>(k)].get();
    const std::string name = CacheKindName(k);
    if (!blocking_) {
      store_series_.push_back(bytes.Callback({name}, [s] { return static_cast<double>(s->stats().bytes); }));
      store_series_.push_back(entries.Callback({name}, [s] { return static_cast<double>(s->stats().entries); }));
      store_series_.push_back(evictions.Callback({name}, [s] { return static_cast<double>(s->stats().evictions); }));
      store_series_.push_back(expirations.Callback({name}, [s] { return static_cast<double>(s->stats().expirations); }));
    }
  }
  if (blocking_) {
    Store* s = stores_[0].get();
    store_series_.push_back(registry_->Counters("tarmac:cache_backend_errors_total",
                                                "Operations the shared backend (Redis) failed.", {"backend"})
                                .Callback({s->name()}, [s] { return static_cast<double>(s->stats().errors); }));
    worker_ = std::make_unique<WorkQueue>(1, static_cast<size_t>(config_.worker_queue), WorkQueue::OnStop::kFinishQueued);
  }
}

CacheService::~CacheService() {
  if (worker_) worker_->Stop();  // before the stores its jobs use go
}

bool CacheService::Submit(std::function<void()> job) {
  if (!blocking_) {
    job();
    return true;
  }
  return worker_->TrySubmit(std::move(job));
}

metrics::LabelValues CacheService::Labels(CacheKind k, metrics::BucketId bucket) const {
  metrics::LabelValues v = {CacheKindName(k)};
  if (bucket == metrics::kNoBucket) {
    v.resize(1 + metrics::BucketTable::LabelNames().size());
  } else {
    for (const std::string& l : registry_->buckets().LabelValues(bucket)) v.push_back(l);
  }
  return v;
}

void CacheService::CountLookup(CacheKind k, metrics::BucketId bucket, bool hit) {
  const metrics::LabelValues l = Labels(k, bucket);
  lookups_->With(l).Add();
  if (hit) hits_->With(l).Add();
}

void CacheService::CountSaved(CacheKind k, metrics::BucketId bucket, int64_t prefill_tokens, int64_t decode_tokens,
                              double seconds) {
  const metrics::LabelValues l = Labels(k, bucket);
  prefill_saved_->With(l).Add(static_cast<double>(prefill_tokens));
  decode_saved_->With(l).Add(static_cast<double>(decode_tokens));
  seconds_saved_->With(l).Add(std::max(0.0, seconds));
}

void CacheService::CountError(CacheKind k) { errors_->With({CacheKindName(k)}).Add(); }

}  // namespace tarmac::cache
