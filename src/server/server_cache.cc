#include "server/server_cache.h"

#include <cctype>

namespace tarmac::server {
namespace {

bool HasDirective(std::string_view header, std::string_view directive) {
  std::string h(header);
  for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t p = 0;
  while ((p = h.find(directive, p)) != std::string::npos) {
    const bool start = p == 0 || h[p - 1] == ',' || h[p - 1] == ' ';
    const size_t e = p + directive.size();
    const bool end = e == h.size() || h[e] == ',' || h[e] == ' ' || h[e] == '=';
    if (start && end) return true;
    p = e;
  }
  return false;
}

const TenantDefaults* Tenant(const ServerConfig& c, const std::string& tenant) {
  auto it = c.tenants.find(tenant);
  return it == c.tenants.end() ? nullptr : &it->second;
}

}  // namespace

std::optional<ApiError> ScopeOf(const ServerConfig& config, const std::string& tenant, const std::string& target,
                                const std::string& locale, const CacheHeaders& headers, cache::RequestScope* out) {
  out->tenant = tenant;
  out->target = target;
  out->permissions.clear();
  out->policy_version.clear();
  if (const TenantDefaults* t = Tenant(config, tenant)) {
    out->permissions = t->scopes;
    out->policy_version = t->policy_version;
  }
  if (!headers.policy_version.empty()) {
    if (headers.policy_version.size() > 128)
      return BadRequest("x-tarmac-policy-version", "the x-tarmac-policy-version header must be at most 128 bytes",
                        "invalid_value");
    out->policy_version = headers.policy_version;
  }
  out->locale = !locale.empty() ? cache::NormalizeLocale(locale) : cache::LocaleFromAcceptLanguage(headers.accept_language);
  return std::nullopt;
}

bool Deterministic(const router::GenerationSpec& spec) {
  return spec.sampling.temperature == 0.0f || spec.sampling.seed.has_value();
}

std::optional<ApiError> PlanResponseCache(const ServerConfig& config, const GenRequest& req, const CacheHeaders& headers,
                                          ResponseCachePlan* out) {
  *out = {};
  const cache::CacheLimits& lim = config.cache.response;
  auto by_config = config.cached_responses.find(req.model);
  const bool opted_in = req.cache_asked || by_config != config.cached_responses.end();
  if (req.cache_refused || !opted_in || HasDirective(headers.cache_control, "no-store")) return std::nullopt;
  if (!Deterministic(req.spec)) {
    if (req.cache_asked)
      return BadRequest("cache", "only deterministic requests are cached: set temperature 0 or a seed", "invalid_value");
    return std::nullopt;  // the route caches what it can; this one it cannot
  }
  double ttl = lim.default_ttl_s;
  if (by_config != config.cached_responses.end() && by_config->second) ttl = *by_config->second;
  if (req.cache_ttl_s) {
    if (*req.cache_ttl_s > lim.max_ttl_s)
      return BadRequest("cache.ttl_s", fmt::format("'cache.ttl_s' must be at most {} s (cache.response.max_ttl_s)", lim.max_ttl_s),
                        "invalid_value");
    ttl = *req.cache_ttl_s;
  }
  out->ttl_s = std::min(ttl, lim.max_ttl_s);
  out->store = true;
  out->lookup = !HasDirective(headers.cache_control, "no-cache");
  return std::nullopt;
}

prefix::SessionRetain SessionRetention(const ServerConfig& config, const std::string& tenant, const std::string& ns_key,
                                       const std::string& session_id) {
  if (session_id.empty()) return {};
  prefix::SessionRetain s;
  s.id = cache::SessionPinId(ns_key, session_id);
  s.ttl_s = config.cache.session.default_ttl_s;
  s.max_blocks = config.cache.session_max_blocks;
  if (const TenantDefaults* t = Tenant(config, tenant); t && t->session_max_blocks) s.max_blocks = *t->session_max_blocks;
  return s;
}

}  // namespace tarmac::server
