// What the server decides about the scoped caches for one request, as pure functions: the
// request's scope (tenant from auth; permissions, policy version and sessions' budget from the
// tenant's config; x-tarmac-policy-version and the locale from the request), whether and how
// its response is cached (deterministic requests only: temperature 0 or an explicit seed;
// opted in by the model's or route's config or by the request's `cache`; Cache-Control:
// no-store skips the cache, no-cache skips the lookup but stores the fresh answer), and the
// session a request's KV prefix is pinned for.
//
// Pure functions over plain values; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache_keys.h"
#include "cache/scope.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/openai_request.h"

namespace tarmac::server {

// The HTTP headers a scope and the cache read ("" when absent).
struct CacheHeaders {
  std::string policy_version;   // x-tarmac-policy-version
  std::string accept_language;  // Accept-Language
  std::string cache_control;    // Cache-Control
};

// The scope of a request by `tenant` naming `target` (a model, a route, or "" for the
// retrieval and tool caches). Errors: a bad x-tarmac-policy-version (400 naming the header).
std::optional<ApiError> ScopeOf(const ServerConfig& config, const std::string& tenant, const std::string& target,
                                const std::string& locale, const CacheHeaders& headers, cache::RequestScope* out);

// Whether a request's output is a function of its inputs alone.
bool Deterministic(const router::GenerationSpec& spec);

struct ResponseCachePlan {
  bool lookup = false;  // look for a cached answer first
  bool store = false;   // store the answer when it completes
  double ttl_s = 0;
  bool active() const { return lookup || store; }
};

// What the response cache does for `req` (naming a model or route). Errors: a TTL beyond the
// cache's max_ttl_s (400 "cache.ttl_s"), `cache` asked for a non-deterministic request (400
// "cache": it would never hit).
std::optional<ApiError> PlanResponseCache(const ServerConfig& config, const GenRequest& req, const CacheHeaders& headers,
                                          ResponseCachePlan* out);

// The KV retention of a session's requests (id 0 when the request names no session).
prefix::SessionRetain SessionRetention(const ServerConfig& config, const std::string& tenant, const std::string& ns_key,
                                       const std::string& session_id);

}  // namespace tarmac::server
