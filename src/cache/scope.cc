#include "cache/scope.h"

#include <algorithm>
#include <cstdint>

namespace tarmac::cache {
namespace {

void PutLength(std::string* out, uint64_t n) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>((n >> shift) & 0xff));
}

void PutField(std::string* out, std::string_view s) {
  PutLength(out, s.size());
  out->append(s);
}

// Every field but the target, in a fixed order.
void PutPrincipal(std::string* out, const RequestScope& s) {
  PutField(out, s.tenant);
  std::vector<std::string> perms = s.permissions;
  std::sort(perms.begin(), perms.end());
  perms.erase(std::unique(perms.begin(), perms.end()), perms.end());
  PutLength(out, perms.size());
  for (const std::string& p : perms) PutField(out, p);
  PutField(out, s.policy_version);
  PutField(out, NormalizeLocale(s.locale));
}

}  // namespace

std::string Encode(const RequestScope& s) {
  std::string out;
  PutField(&out, "tarmac.scope.v1");
  PutPrincipal(&out, s);
  PutField(&out, s.target);
  return out;
}

Digest256 ScopeDigest(const RequestScope& s) { return Sha256(Encode(s)); }

Digest256 TenantDigest(std::string_view tenant) {
  std::string out;
  PutField(&out, "tarmac.tenant.v1");
  PutField(&out, tenant);
  return Sha256(out);
}

std::string NamespaceKey(std::string_view secret, const RequestScope& s) {
  std::string out;
  PutField(&out, "tarmac.prefix.v1");
  PutPrincipal(&out, s);
  const Digest256 d = HmacSha256(secret, out);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string NormalizeLocale(std::string_view locale) {
  std::string out;
  for (char c : locale) {
    if (c == '_') c = '-';
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != ' ' && c != '\t') out.push_back(c);
  }
  return out;
}

std::string LocaleFromAcceptLanguage(std::string_view header) {
  const size_t comma = header.find(',');
  std::string_view first = header.substr(0, comma);
  first = first.substr(0, first.find(';'));
  std::string l = NormalizeLocale(first);
  return l == "*" ? std::string() : l;
}

}  // namespace tarmac::cache
