// Session: the scoped caches' own endpoints (server_internal.h):
//   PUT    /v1/cache/{retrieval|tool}/{key}   {"value": any JSON, "ttl_s"?, "cost_s"?}
//   GET    /v1/cache/{retrieval|tool}/{key}   -> {"key", "value", "age_s"} or 404
//   DELETE /v1/cache/{retrieval|tool}/{key}   -> {"deleted": bool}
//   DELETE /v1/cache/{retrieval|tool}         -> the tenant's entries of that cache
//   DELETE /v1/cache/responses[?model=M]      -> the tenant's cached responses (of M, in this scope)
//   GET/PUT /v1/sessions/{id}/state, DELETE /v1/sessions/{id}   (owned by the creating tenant)
// Everything is under the caller's scope; another tenant's entries are simply not there.
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "cache/cache_keys.h"
#include "server/server_internal.h"

namespace tarmac::server {
namespace {

using cache::CacheKind;
using Reply = CacheReply;

Reply Ok(const Json& j) { return {200, j.dump()}; }
Reply Err(const ApiError& e) { return {e.status, e.ToJson()}; }
Reply Backend(const Status& st) { return Err(Unavailable("the cache backend is unavailable: " + st.message(), 1)); }

// "%41b" -> "Ab"; false on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(in[i + 2])))
      return false;
    out->push_back(static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16)));
    i += 2;
  }
  return true;
}

bool ValidSessionId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != ':') return false;
  return true;
}

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    const size_t s = path.find('/');
    if (s != 0) out.push_back(path.substr(0, s));
    if (s == std::string_view::npos) break;
    path.remove_prefix(s + 1);
  }
  return out;
}


// The body of a PUT of a retrieval or tool value.
std::optional<ApiError> ParseValuePut(const std::string& body, const cache::CacheLimits& lim, Json* value,
                                      double* ttl_s, double* cost_s) {
  const Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return BadRequest("", "the body must be a JSON object {\"value\": ...}", "invalid_json");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "value" && it.key() != "ttl_s" && it.key() != "cost_s")
      return BadRequest(it.key(), "Unrecognized argument: " + it.key(), "unknown_parameter");
  if (!j.contains("value")) return BadRequest("value", "'value' is required", "missing_parameter");
  *value = j["value"];
  *ttl_s = lim.default_ttl_s;
  if (j.contains("ttl_s")) {
    if (!j["ttl_s"].is_number() || !(j["ttl_s"].get<double>() > 0) || j["ttl_s"].get<double>() > lim.max_ttl_s)
      return BadRequest("ttl_s", fmt::format("'ttl_s' must be a number in (0, {}]", lim.max_ttl_s), "invalid_value");
    *ttl_s = j["ttl_s"].get<double>();
  }
  *cost_s = 0;
  if (j.contains("cost_s")) {
    if (!j["cost_s"].is_number() || !(j["cost_s"].get<double>() >= 0))
      return BadRequest("cost_s", "'cost_s' must be a number >= 0 (seconds the value took to produce)", "invalid_value");
    *cost_s = j["cost_s"].get<double>();
  }
  return std::nullopt;
}

}  // namespace

std::string CacheApiMethods(std::string_view path) {
  const std::vector<std::string_view> seg = Segments(path);  // v1, cache|sessions, ...
  if (seg.size() < 3 || seg[0] != "v1") return "";
  if (seg[1] == "cache") {
    if (seg.size() == 3 && (seg[2] == "responses" || seg[2] == "retrieval" || seg[2] == "tool")) return "DELETE";
    if (seg.size() == 4 && (seg[2] == "retrieval" || seg[2] == "tool")) return "GET, HEAD, PUT, DELETE";
  } else if (seg[1] == "sessions") {
    if (seg.size() == 3) return "DELETE";
    if (seg.size() == 4 && seg[3] == "state") return "GET, HEAD, PUT";
  }
  return "";
}

ApiError MethodNotAllowed(http::verb method, std::string_view path, const std::string& allow) {
  ApiError e = BadRequest("", fmt::format("method {} is not allowed on {} (use {})", std::string(http::to_string(method)),
                                          path, allow), "method_not_allowed");
  e.status = 405;
  e.allow = allow;
  return e;
}

void Session::RunCacheOp(std::function<CacheReply()> op) {
  // The job holds the session: nothing else does while the cache answers.
  std::shared_ptr<Session> self = shared_from_this();
  asio::io_context* ioc = &srv_->ioc;
  auto job = [op = std::move(op), self, ioc] {
    CacheReply r = op();
    asio::post(*ioc, [self, r = std::move(r)] { self->Respond(r.status, "application/json", r.body); });
  };
  if (!srv_->caches()->Submit(std::move(job))) RespondError(Unavailable("the cache is busy; retry later", 1));
}

void Session::HandleCacheApi(const std::string& tenant, http::verb method, const std::string& raw_target) {
  const auto& req = parser_->get();
  std::string path = raw_target, query;
  if (auto q = path.find('?'); q != std::string::npos) {
    query = path.substr(q + 1);
    path.resize(q);
  }
  const std::vector<std::string_view> seg = Segments(path);  // v1, cache|sessions, ...
  std::shared_ptr<cache::CacheService> caches = srv_->caches();
  const CacheHeaders headers = RequestCacheHeaders();
  cache::RequestScope scope;
  if (auto e = ScopeOf(srv_->config(), tenant, "", "", headers, &scope)) return RespondError(*e);
  const bool is_cache = seg.size() >= 2 && seg[1] == "cache";
  const std::string allow = CacheApiMethods(path) + (srv_->cors.enabled() ? ", OPTIONS" : "");

  if (is_cache && seg.size() == 3 && seg[2] == "responses") {
    if (method != http::verb::delete_) return RespondError(MethodNotAllowed(method, path, allow));
    std::string model;
    if (query.rfind("model=", 0) == 0 && !PercentDecode(query.substr(6), &model))
      return RespondError(BadRequest("model", "malformed percent-escape in 'model'"));
    if (!query.empty() && query.rfind("model=", 0) != 0)
      return RespondError(BadRequest(query.substr(0, query.find('=')), "the only query parameter here is 'model'"));
    scope.target = model;
    const std::string prefix = model.empty() ? cache::ResponseTenantPrefix(tenant) : cache::ResponseScopePrefix(scope);
    return RunCacheOp([caches, prefix] {
      auto n = caches->store(CacheKind::kResponse).ErasePrefix(prefix);
      if (!n.ok()) return Backend(n.status());
      return Ok({{"deleted", *n}});
    });
  }
  if (is_cache && (seg.size() == 3 || seg.size() == 4) && (seg[2] == "retrieval" || seg[2] == "tool")) {
    const cache::ValueKind vk = seg[2] == "retrieval" ? cache::ValueKind::kRetrieval : cache::ValueKind::kTool;
    const CacheKind kind = vk == cache::ValueKind::kRetrieval ? CacheKind::kRetrieval : CacheKind::kTool;
    if (seg.size() == 3) {
      if (method != http::verb::delete_) return RespondError(MethodNotAllowed(method, path, allow));
      const std::string prefix = cache::ValueTenantPrefix(vk, tenant);
      return RunCacheOp([caches, kind, prefix] {
        auto n = caches->store(kind).ErasePrefix(prefix);
        if (!n.ok()) return Backend(n.status());
        return Ok({{"deleted", *n}});
      });
    }
    std::string key;
    if (!PercentDecode(seg[3], &key) || key.empty() || key.size() > 512)
      return RespondError(BadRequest("key", "the cache key must be 1 to 512 bytes (percent-escapes allowed)", "invalid_value"));
    const std::string store_key = cache::ValueKey(vk, scope, key);
    if (method == http::verb::get || method == http::verb::head) {
      return RunCacheOp([caches, kind, store_key, key] {
        auto got = caches->store(kind).Get(store_key);
        if (!got.ok()) caches->CountError(kind);
        const bool hit = got.ok() && got->has_value();
        caches->CountLookup(kind, metrics::kNoBucket, hit);
        if (!hit)
          return Err(NotFound(got.ok() ? "not cached: '" + key + "'"
                                       : "not cached: '" + key + "' (the cache backend is unavailable: " + got.status().message() + ")",
                              "key", "cache_miss"));
        const Json j = Json::parse(**got, nullptr, false);
        if (!j.is_object() || !j.contains("value")) {
          caches->CountError(kind);
          return Err(NotFound("not cached: '" + key + "'", "key", "cache_miss"));
        }
        const double cost = j.value("cost_s", 0.0);
        caches->CountSaved(kind, metrics::kNoBucket, 0, 0, cost);
        return Ok({{"key", key}, {"value", j["value"]}, {"age_s", NowUnixSeconds() - j.value("stored_at", 0.0)}});
      });
    }
    if (method == http::verb::put) {
      const cache::CacheLimits& lim = caches->config().limits(kind);
      Json value;
      double ttl = 0, cost = 0;
      if (auto e = ParseValuePut(req.body(), lim, &value, &ttl, &cost)) return RespondError(*e);
      std::string bytes = Json{{"value", std::move(value)}, {"cost_s", cost}, {"stored_at", NowUnixSeconds()}}.dump();
      if (static_cast<int64_t>(bytes.size()) > lim.max_entry_bytes)
        return RespondError(TooLarge(fmt::format("the value is {} bytes; this cache keeps values of at most {} bytes "
                                                 "(cache.{}.max_entry_bytes)", bytes.size(), lim.max_entry_bytes,
                                                 cache::CacheKindName(kind))));
      return RunCacheOp([caches, kind, store_key, key, bytes = std::move(bytes), ttl] {
        Status st = caches->store(kind).Put(store_key, bytes, ttl);
        if (!st.ok()) {
          caches->CountError(kind);
          return Backend(st);
        }
        return Ok({{"key", key}, {"ttl_s", ttl}});
      });
    }
    if (method == http::verb::delete_) {
      return RunCacheOp([caches, kind, store_key] {
        auto d = caches->store(kind).Erase(store_key);
        if (!d.ok()) return Backend(d.status());
        return Ok({{"deleted", *d}});
      });
    }
    return RespondError(MethodNotAllowed(method, path, allow));
  }
  if (!is_cache && (seg.size() == 3 || (seg.size() == 4 && seg[3] == "state"))) {
    const std::string id(seg[2]);
    if (!ValidSessionId(id))
      return RespondError(BadRequest("session_id", "a session id is 1 to 128 letters, digits, '-', '_', '.' or ':'", "invalid_value"));
    const std::string key = cache::SessionKey(id);
    const cache::CacheLimits& lim = caches->config().session;
    const bool state = seg.size() == 4;
    if (state && (method == http::verb::get || method == http::verb::head)) {
      return RunCacheOp([caches, key, id, tenant] {
        auto got = caches->store(CacheKind::kSession).Get(key);
        if (!got.ok()) return Backend(got.status());
        const Json j = got->has_value() ? Json::parse(**got, nullptr, false) : Json();
        if (!j.is_object() || j.value("tenant", std::string()) != tenant) return Err(NotFound("no session '" + id + "'", "session_id"));
        return Ok({{"id", id}, {"state", j["state"]}});
      });
    }
    if (state && method == http::verb::put) {
      const Json body = Json::parse(req.body(), nullptr, false);
      if (body.is_discarded() || !body.is_object())
        return RespondError(BadRequest("", "a session's state must be a JSON object", "invalid_json"));
      std::string probe = body.dump();
      if (static_cast<int64_t>(probe.size()) > lim.max_entry_bytes)
        return RespondError(TooLarge(fmt::format("the state is {} bytes; sessions keep at most {} bytes (cache.session.max_entry_bytes)",
                                                 probe.size(), lim.max_entry_bytes)));
      return RunCacheOp([caches, key, id, tenant, body, ttl = lim.default_ttl_s] {
        cache::Store& st = caches->store(CacheKind::kSession);
        auto got = st.Get(key);
        if (!got.ok()) return Backend(got.status());
        if (got->has_value()) {
          const Json j = Json::parse(**got, nullptr, false);
          if (!j.is_object() || j.value("tenant", std::string()) != tenant) return Err(NotFound("no session '" + id + "'", "session_id"));
        }
        Status put = st.Put(key, Json{{"tenant", tenant}, {"state", body}, {"updated", NowUnixSeconds()}}.dump(), ttl);
        if (!put.ok()) return Backend(put);
        return Ok({{"id", id}, {"state", body}});
      });
    }
    if (!state && method == http::verb::delete_) {
      return RunCacheOp([caches, key, id, tenant] {
        cache::Store& st = caches->store(CacheKind::kSession);
        auto got = st.Get(key);
        if (!got.ok()) return Backend(got.status());
        const Json j = got->has_value() ? Json::parse(**got, nullptr, false) : Json();
        if (!j.is_object() || j.value("tenant", std::string()) != tenant) return Err(NotFound("no session '" + id + "'", "session_id"));
        auto d = st.Erase(key);
        if (!d.ok()) return Backend(d.status());
        return Ok({{"deleted", *d}});
      });
    }
    return RespondError(MethodNotAllowed(method, path, allow));
  }
  RespondError(NotFound(fmt::format("Invalid URL ({} {})", std::string(http::to_string(method)), path)));
}

}  // namespace tarmac::server
