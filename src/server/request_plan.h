// RequestPlan: what a generation request needs computed once, off the I/O thread, before
// anything is decided for it: the request prepared on its key model (the model it names, or a
// route's baseline: the prompts as that model renders and encodes them, checked), its bucket
// features and bucket, and its response-cache key. A route's policy decides on the plan (its
// probe), a plain model's request runs on it, the cache is keyed by it; the spec's EncodedPrompts
// keep every model's encoding, so nothing encodes the request twice.
//
// And the response cache's first question, asked on the caches' thread: whose session the
// request continues, and whether its answer is stored (CacheAnswer).
//
// Plain values and functions; PlanRequest and LookUpCaches are thread-safe.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/cache_service.h"
#include "cache/recorded_response.h"
#include "cache/scope.h"
#include "metrics/request_bucket.h"
#include "router/generation_spec.h"
#include "router/pool_model.h"

namespace tarmac::server {

struct RequestPlan {
  std::string key_model;               // whose preparation this is
  router::PreparedRequests prepared;   // the request on key_model
  metrics::RequestFeatures features;   // engine::BucketFeatures of its first request
  metrics::BucketId bucket = metrics::kNoBucket;
  std::string cache_key;               // "": the response is not cached
};

// The plan of `spec` on `key_model`; `keyed`: compute the response-cache key under `scope`
// with the request's output-changing `key_params`. Errors: the request's (a 400 naming the
// field), as preparing it would give them. May throw (an injected tokenize fault).
// Preconditions: spec.encoded is set (the plan's encoding is kept for the later steps).
Result<RequestPlan> PlanRequest(const router::PoolModel& key_model, const router::GenerationSpec& spec,
                                metrics::BucketTable& buckets, bool keyed, const cache::RequestScope& scope,
                                const nlohmann::json& key_params);

struct CacheAnswer {
  bool not_owner = false;  // the session belongs to another tenant
  bool error = false;      // a store failed (counted; the request runs as a miss)
  std::optional<cache::RecordedResponse> hit;
};

// The session's owner (claimed for `tenant` when the session is new; `session_key` "": no
// session), then the stored answer under `response_key` ("": no lookup). Blocks on the
// stores: run it on the caches' thread.
CacheAnswer LookUpCaches(cache::CacheService& caches, const std::string& response_key, const std::string& session_key,
                         const std::string& tenant);

}  // namespace tarmac::server
