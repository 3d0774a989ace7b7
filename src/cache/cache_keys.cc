#include "cache/cache_keys.h"

namespace tarmac::cache {
namespace {

void PutField(std::string* out, std::string_view s) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>((s.size() >> shift) & 0xff));
  out->append(s);
}

std::string Short(const Digest256& d) { return Hex(d).substr(0, 32); }

}  // namespace

const char* ValueKindName(ValueKind k) { return k == ValueKind::kRetrieval ? "retrieval" : "tool"; }

std::string ResponseKey(const RequestScope& scope, const std::vector<std::vector<int32_t>>& prompts,
                        const nlohmann::json& params) {
  std::string parts;
  PutField(&parts, "tarmac.response.v1");
  PutField(&parts, Encode(scope));
  PutField(&parts, std::to_string(prompts.size()));
  for (const std::vector<int32_t>& p : prompts) {
    std::string ids;
    ids.reserve(p.size() * 4);
    for (int32_t t : p)
      for (int shift = 24; shift >= 0; shift -= 8) ids.push_back(static_cast<char>((static_cast<uint32_t>(t) >> shift) & 0xff));
    PutField(&parts, ids);
  }
  PutField(&parts, params.dump());  // nlohmann::json orders object keys: canonical
  return ResponseScopePrefix(scope) + Hex(Sha256(parts));
}

std::string ResponseTenantPrefix(std::string_view tenant) { return "tarmac:r:" + Short(TenantDigest(tenant)) + ":"; }

std::string ResponseScopePrefix(const RequestScope& scope) {
  return ResponseTenantPrefix(scope.tenant) + Short(ScopeDigest(scope)) + ":";
}

std::string ValueKey(ValueKind kind, const RequestScope& scope, std::string_view key) {
  RequestScope s = scope;
  s.target.clear();
  std::string parts;
  PutField(&parts, "tarmac.value.v1");
  PutField(&parts, ValueKindName(kind));
  PutField(&parts, Encode(s));
  PutField(&parts, key);
  return ValueTenantPrefix(kind, scope.tenant) + Hex(Sha256(parts));
}

std::string ValueTenantPrefix(ValueKind kind, std::string_view tenant) {
  return std::string("tarmac:") + ValueKindName(kind) + ":" + Short(TenantDigest(tenant)) + ":";
}

std::string SessionKey(std::string_view session_id) {
  std::string parts;
  PutField(&parts, "tarmac.session.v1");
  PutField(&parts, session_id);
  return "tarmac:s:" + Hex(Sha256(parts));
}

uint64_t SessionPinId(std::string_view ns_key, std::string_view session_id) {
  std::string parts;
  PutField(&parts, "tarmac.session-pin.v1");
  PutField(&parts, session_id);
  const uint64_t id = First64(HmacSha256(ns_key, parts));
  return id == 0 ? 1 : id;
}

}  // namespace tarmac::cache
