#include "cache/scope.h"

#include <random>
#include <map>
#include <set>

#include <gtest/gtest.h>

namespace tarmac::cache {
namespace {

RequestScope Base() { return RequestScope{"acme", {"accounts.read", "cards.read"}, "v3", "en-GB", "auto"}; }

TEST(Scope, EveryFieldChangesTheDigest) {
  const Digest256 base = ScopeDigest(Base());
  std::vector<RequestScope> changed(7, Base());
  changed[0].tenant = "acme2";
  changed[1].permissions.pop_back();
  changed[2].permissions.push_back("cards.write");
  changed[3].policy_version = "v4";
  changed[4].locale = "en-US";
  changed[5].target = "wp-11m";
  changed[6].locale = "";
  for (const RequestScope& s : changed) EXPECT_FALSE(DigestEqual(ScopeDigest(s), base)) << Hex(ScopeDigest(s));
}

TEST(Scope, CanonicalFormIgnoresOrderDuplicatesAndLocaleCase) {
  RequestScope a = Base(), b = Base();
  b.permissions = {"cards.read", "accounts.read", "cards.read"};
  b.locale = "en_gb";
  EXPECT_EQ(Encode(a), Encode(b));
}

TEST(Scope, LengthPrefixesKeepFieldBoundaries) {
  // Concatenations that agree byte for byte must still differ.
  RequestScope a{"ab", {}, "c", "", "m"}, b{"a", {}, "bc", "", "m"}, c{"a", {"b"}, "c", "", "m"}, d{"a", {}, "", "", "bm"};
  std::set<std::string> seen;
  for (const RequestScope& s : {a, b, c, d}) EXPECT_TRUE(seen.insert(Hex(ScopeDigest(s))).second);
  // Random short fields over a tiny alphabet: no two distinct canonical forms share a digest,
  // and equal forms only come from equal scopes.
  std::mt19937 rng(1);
  auto word = [&] {
    std::string w;
    for (int i = static_cast<int>(rng() % 3); i > 0; --i) w.push_back("ab"[rng() % 2]);
    return w;
  };
  std::map<std::string, std::string> by_digest;
  for (int i = 0; i < 20000; ++i) {
    RequestScope s{word(), {}, word(), word(), word()};
    for (int p = static_cast<int>(rng() % 3); p > 0; --p) s.permissions.push_back(word());
    const std::string e = Encode(s);
    auto [it, fresh] = by_digest.emplace(Hex(ScopeDigest(s)), e);
    EXPECT_EQ(it->second, e);
  }
}

TEST(Scope, TenantDigestIsNotAScopeDigest) {
  RequestScope s{"acme", {}, "", "", ""};
  EXPECT_FALSE(DigestEqual(TenantDigest("acme"), ScopeDigest(s)));
  EXPECT_FALSE(DigestEqual(TenantDigest("acme"), TenantDigest("acme2")));
}

TEST(Scope, NamespaceKeyNeedsTheSecretAndIgnoresTheTarget) {
  RequestScope s = Base(), t = Base();
  t.target = "wp-11m";
  EXPECT_EQ(NamespaceKey("secret", s), NamespaceKey("secret", t));
  EXPECT_NE(NamespaceKey("secret", s), NamespaceKey("other", s));
  t = Base();
  t.policy_version = "v4";
  EXPECT_NE(NamespaceKey("secret", s), NamespaceKey("secret", t));
  t = Base();
  t.tenant = "evil";
  EXPECT_NE(NamespaceKey("secret", s), NamespaceKey("secret", t));
  EXPECT_EQ(NamespaceKey("secret", s).size(), 32u);
}

TEST(Scope, Locales) {
  EXPECT_EQ(NormalizeLocale("en_US"), "en-us");
  EXPECT_EQ(LocaleFromAcceptLanguage("fr-CH, fr;q=0.9, en;q=0.8"), "fr-ch");
  EXPECT_EQ(LocaleFromAcceptLanguage("de;q=0.7"), "de");
  EXPECT_EQ(LocaleFromAcceptLanguage("*"), "");
  EXPECT_EQ(LocaleFromAcceptLanguage(""), "");
}

}  // namespace
}  // namespace tarmac::cache
