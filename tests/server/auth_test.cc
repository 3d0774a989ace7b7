// API key file parsing, lookup, bearer parsing and tenant namespaces.
#include "server/auth.h"

#include <gtest/gtest.h>

namespace tarmac::server {
namespace {

TEST(ApiKeyStore, ParsesAndLooksUp) {
  auto s = ApiKeyStore::Parse("# comment\n\nsk-aaaaaaaa alpha\r\nsk-bbbbbbbb\n", "keys");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->size(), 2u);
  EXPECT_EQ(s->Lookup("sk-aaaaaaaa"), "alpha");
  EXPECT_EQ(s->Lookup("sk-bbbbbbbb"), "key2");
  EXPECT_FALSE(s->Lookup("sk-aaaaaaab"));
  EXPECT_FALSE(s->Lookup("sk-aaaaaaa"));
  EXPECT_FALSE(s->Lookup(""));
}

TEST(ApiKeyStore, RejectsBadFiles) {
  EXPECT_FALSE(ApiKeyStore::Parse("", "keys").ok());
  EXPECT_FALSE(ApiKeyStore::Parse("short t\n", "keys").ok());
  EXPECT_FALSE(ApiKeyStore::Parse("sk-aaaaaaaa a b\n", "keys").ok());
  EXPECT_FALSE(ApiKeyStore::Load("/nonexistent/keys").ok());
}

TEST(Auth, BearerToken) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer   abc  "), "abc");
  EXPECT_EQ(BearerToken("Basic abc"), "");
  EXPECT_EQ(BearerToken("Bearer"), "");
}

}  // namespace
}  // namespace tarmac::server
