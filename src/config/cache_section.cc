#include "config/cache_section.h"

#include "cache/redis_store.h"

namespace tarmac::config {
namespace {

Status ParseLimits(const At& a, cache::CacheLimits* l, int64_t* max_blocks) {
  std::set<std::string> known = {"max_bytes", "ttl_s", "max_ttl_s", "max_entry_bytes"};
  if (max_blocks != nullptr) known.insert("max_blocks");
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, known));
  if (a.has("max_bytes")) {
    TARMAC_ASSIGN_OR_RETURN(l->max_bytes, Integer(a.Key("max_bytes"), 1, int64_t{1} << 50));
  }
  if (a.has("max_entry_bytes")) {
    TARMAC_ASSIGN_OR_RETURN(l->max_entry_bytes, Integer(a.Key("max_entry_bytes"), 1, int64_t{1} << 40));
  }
  auto seconds = [&](const char* k, double* out) -> Status {
    if (!a.has(k)) return Status::Ok();
    TARMAC_ASSIGN_OR_RETURN(*out, Number(a.Key(k)));
    if (!(*out > 0)) return a.Key(k).Error("must be > 0 seconds, got {}", *out);
    return Status::Ok();
  };
  TARMAC_RETURN_IF_ERROR(seconds("ttl_s", &l->default_ttl_s));
  TARMAC_RETURN_IF_ERROR(seconds("max_ttl_s", &l->max_ttl_s));
  if (l->max_ttl_s < l->default_ttl_s)
    return a.Error("max_ttl_s ({}) is below ttl_s ({})", l->max_ttl_s, l->default_ttl_s);
  if (max_blocks != nullptr && a.has("max_blocks")) {
    TARMAC_ASSIGN_OR_RETURN(*max_blocks, Integer(a.Key("max_blocks"), 1, int64_t{1} << 30));
  }
  return Status::Ok();
}

}  // namespace

Status ParseCacheSection(const At& a, cache::CacheConfig* out, std::string* secret_file) {
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"backend", "url", "secret_file", "response", "retrieval", "tool", "session"}));
  if (a.has("backend")) {
    TARMAC_ASSIGN_OR_RETURN(std::string b, String(a.Key("backend")));
    if (b == "memory") {
      out->backend = cache::CacheConfig::Backend::kMemory;
    } else if (b == "redis") {
      out->backend = cache::CacheConfig::Backend::kRedis;
    } else {
      return a.Key("backend").Error("must be 'memory' or 'redis', got '{}'", b);
    }
  }
  if (a.has("url")) {
    TARMAC_ASSIGN_OR_RETURN(out->redis_url, String(a.Key("url")));
    if (out->backend != cache::CacheConfig::Backend::kRedis) return a.Key("url").Error("a url needs backend: redis");
  }
  if (out->backend == cache::CacheConfig::Backend::kRedis) {
    if (!a.has("url")) return a.Error("backend: redis needs a url (redis://host:port)");
    if (auto o = cache::ParseRedisUrl(out->redis_url); !o.ok()) return a.Key("url").Error("{}", o.status().message());
  }
  if (a.has("secret_file")) {
    TARMAC_ASSIGN_OR_RETURN(*secret_file, String(a.Key("secret_file")));
  }
  if (a.has("response")) TARMAC_RETURN_IF_ERROR(ParseLimits(a.Key("response"), &out->response, nullptr));
  if (a.has("retrieval")) TARMAC_RETURN_IF_ERROR(ParseLimits(a.Key("retrieval"), &out->retrieval, nullptr));
  if (a.has("tool")) TARMAC_RETURN_IF_ERROR(ParseLimits(a.Key("tool"), &out->tool, nullptr));
  if (a.has("session")) TARMAC_RETURN_IF_ERROR(ParseLimits(a.Key("session"), &out->session, &out->session_max_blocks));
  return Status::Ok();
}

Result<std::optional<std::optional<double>>> ParseCacheResponses(const At& a) {
  using R = std::optional<std::optional<double>>;
  if (a.node.IsScalar()) {
    TARMAC_ASSIGN_OR_RETURN(bool on, Bool(a));
    return on ? R(std::optional<double>()) : R();
  }
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"ttl_s"}));
  if (!a.has("ttl_s")) return R(std::optional<double>());
  TARMAC_ASSIGN_OR_RETURN(double ttl, Number(a.Key("ttl_s")));
  if (!(ttl > 0)) return a.Key("ttl_s").Error("must be > 0 seconds, got {}", ttl);
  return R(std::optional<double>(ttl));
}

}  // namespace tarmac::config
