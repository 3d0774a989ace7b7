#include "cache/cache_keys.h"

#include <gtest/gtest.h>

namespace tarmac::cache {
namespace {

using Json = nlohmann::json;

RequestScope S() { return RequestScope{"acme", {"a.read"}, "v1", "en", "auto"}; }

TEST(CacheKeys, ResponseKeysDifferInEveryPart) {
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}};
  const Json params = {{"temperature", 0}, {"max_tokens", 8}};
  const std::string base = ResponseKey(S(), prompts, params);
  RequestScope other = S();
  other.target = "wp-11m";
  EXPECT_NE(ResponseKey(other, prompts, params), base);
  EXPECT_NE(ResponseKey(S(), {{1, 2, 4}}, params), base);
  EXPECT_NE(ResponseKey(S(), {{1, 2}, {3}}, params), base);
  EXPECT_NE(ResponseKey(S(), prompts, Json{{"temperature", 0}, {"max_tokens", 9}}), base);
  EXPECT_EQ(ResponseKey(S(), prompts, Json{{"max_tokens", 8}, {"temperature", 0}}), base);  // key order
  // Grouped by tenant, then scope.
  EXPECT_EQ(base.rfind(ResponseScopePrefix(S()), 0), 0u);
  EXPECT_EQ(base.rfind(ResponseTenantPrefix("acme"), 0), 0u);
  EXPECT_NE(base.rfind(ResponseTenantPrefix("acme2"), 0), 0u);
  EXPECT_NE(ResponseScopePrefix(other), ResponseScopePrefix(S()));
}

TEST(CacheKeys, ValueKeysIgnoreTheTargetButNotThePrincipal) {
  RequestScope s = S(), t = S();
  t.target = "other";
  EXPECT_EQ(ValueKey(ValueKind::kRetrieval, s, "q1"), ValueKey(ValueKind::kRetrieval, t, "q1"));
  EXPECT_NE(ValueKey(ValueKind::kRetrieval, s, "q1"), ValueKey(ValueKind::kTool, s, "q1"));
  EXPECT_NE(ValueKey(ValueKind::kRetrieval, s, "q1"), ValueKey(ValueKind::kRetrieval, s, "q2"));
  t = S();
  t.permissions.clear();
  EXPECT_NE(ValueKey(ValueKind::kTool, s, "q"), ValueKey(ValueKind::kTool, t, "q"));
  EXPECT_EQ(ValueKey(ValueKind::kTool, s, "q").rfind(ValueTenantPrefix(ValueKind::kTool, "acme"), 0), 0u);
}

TEST(CacheKeys, SessionIds) {
  EXPECT_NE(SessionKey("s1"), SessionKey("s2"));
  EXPECT_EQ(SessionKey("s1"), SessionKey("s1"));
  EXPECT_NE(SessionPinId("key-a", "s1"), SessionPinId("key-b", "s1"));
  EXPECT_NE(SessionPinId("key-a", "s1"), 0u);
}

}  // namespace
}  // namespace tarmac::cache
