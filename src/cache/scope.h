// RequestScope: who is asking and under which rules, as the caches and the prefix-cache
// namespace see it: the tenant (from authentication), its permission scopes (from the tenant's
// config), the policy version (tenant config, or the request's x-tarmac-policy-version), the
// locale (request field or Accept-Language) and the model or route asked for.
//
// Encode() is the one canonical byte string of a scope: a version tag, then every field as a
// length-prefixed string (permissions as a count and sorted, de-duplicated entries), so two
// different scopes can never encode, and so never hash, alike. Keys are SHA-256 digests of it;
// the prefix-cache namespace key is an HMAC of it under the server's secret.
//
// Plain values; pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/digest.h"

namespace tarmac::cache {

struct RequestScope {
  std::string tenant;
  std::vector<std::string> permissions;  // any order; Encode sorts and de-duplicates
  std::string policy_version;            // "" : none
  std::string locale;                    // "" : none; compared case-insensitively
  std::string target;                    // the model or route the request named
};

// The canonical encoding (binary).
std::string Encode(const RequestScope& s);
// SHA-256 of Encode(s): the scope part of every cache key.
Digest256 ScopeDigest(const RequestScope& s);
// A tenant's digest: groups every entry of one tenant (for invalidation), and never equals a
// scope's digest (another version tag).
Digest256 TenantDigest(std::string_view tenant);
// The key a request's prefix-cache namespaces derive from (one per model; see
// router::PrefixNamespace): HMAC-SHA-256 under the server's secret of the scope without its
// target, so a namespace can be neither guessed nor shared across tenants, permissions,
// policy versions or locales, while a route's models each get one of their own.
std::string NamespaceKey(std::string_view secret, const RequestScope& s);

// A locale as compared: ASCII lower case, '_' read as '-' ("en_US" == "en-us"); the first
// language range of an Accept-Language header value ("fr-CH, fr;q=0.9" -> "fr-ch"), "" for "*".
std::string NormalizeLocale(std::string_view locale);
std::string LocaleFromAcceptLanguage(std::string_view header);

}  // namespace tarmac::cache
