// Per-tenant concurrency and token-rate limits: each tenant its own counts and bucket, the
// config's tenants over the defaults, refusals that name the limit with a Retry-After, the
// token debt paid back by the refill, and the books balanced (CheckIntegrity) after each step.
#include "server/tenant_limits.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

namespace tarmac::server {
namespace {

TEST(TenantLimiter, OffByDefault) {
  TenantLimiter l({}, {});
  EXPECT_FALSE(l.enabled());
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(l.Acquire("a", i, 1000000, 0.0));
}

TEST(TenantLimiter, ConcurrencyPerTenant) {
  TenantLimiter l({.max_concurrent = 2}, {});
  EXPECT_FALSE(l.Acquire("a", 1, 10, 0.0));
  EXPECT_FALSE(l.Acquire("a", 2, 10, 0.0));
  auto r = l.Acquire("a", 3, 10, 0.0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, "tenant_concurrency_exceeded");
  EXPECT_GE(r->retry_after_s, 1);
  EXPECT_NE(r->message.find("tenant 'a'"), std::string::npos) << r->message;
  EXPECT_NE(r->message.find("max_concurrent 2"), std::string::npos) << r->message;
  EXPECT_FALSE(l.Acquire("b", 4, 10, 0.0));  // another tenant is not affected
  l.Release(1, 5, 0.1);
  EXPECT_FALSE(l.Acquire("a", 5, 10, 0.1));
  EXPECT_EQ(l.in_flight("a"), 2);
  l.Release(1, 0, 0.2);  // twice: no-op
  EXPECT_EQ(l.in_flight("a"), 2);
  EXPECT_TRUE(l.CheckIntegrity().ok());
}

TEST(TenantLimiter, PrecheckRefusesWhatAcquireWouldWithoutChangingAnything) {
  TenantLimiter l({.max_concurrent = 1, .tokens_per_s = 100, .token_burst = 100}, {});
  EXPECT_FALSE(l.Precheck("a", 0.0));
  EXPECT_FALSE(l.Acquire("a", 1, 150, 0.0));  // in flight; bucket 100 -> -50
  auto r = l.Precheck("a", 0.0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, "tenant_concurrency_exceeded");
  EXPECT_EQ(l.in_flight("a"), 1);
  l.Release(1, 0, 0.1);
  r = l.Precheck("a", 0.1);  // no longer at its cap, but still in debt (-40)
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, "tenant_tokens_exceeded");
  EXPECT_FALSE(l.Precheck("b", 0.1));  // another tenant is not affected
  EXPECT_FALSE(l.Precheck("a", 0.6));  // +60: paid back, and Precheck spent nothing
  EXPECT_FALSE(l.Precheck("a", 0.6));
  EXPECT_EQ(l.in_flight("a"), 0);
  EXPECT_TRUE(l.CheckIntegrity().ok());
}

TEST(TenantLimiter, PerTenantOverridesTheDefaults) {
  TenantLimiter l({.max_concurrent = 1}, {{"big", {.max_concurrent = 3}}});
  EXPECT_EQ(l.LimitOf("big").max_concurrent, 3);
  EXPECT_EQ(l.LimitOf("other").max_concurrent, 1);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(l.Acquire("big", i, 1, 0.0));
  EXPECT_TRUE(l.Acquire("big", 3, 1, 0.0));
  EXPECT_FALSE(l.Acquire("small", 4, 1, 0.0));
  EXPECT_TRUE(l.Acquire("small", 5, 1, 0.0));
}

TEST(TenantLimiter, TokenRateIsADebtPaidBackByTheRefill) {
  // 100 tokens/s, bucket 200.
  TenantLimiter l({.tokens_per_s = 100, .token_burst = 200}, {});
  EXPECT_FALSE(l.Acquire("a", 1, 150, 0.0));  // 200 -> 50
  l.Release(1, 100, 0.0);                     // generated 100: 50 -> -50
  auto r = l.Acquire("a", 2, 10, 0.0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, "tenant_tokens_exceeded");
  EXPECT_EQ(r->retry_after_s, 1);  // 50 tokens at 100/s: within a second
  EXPECT_NE(r->message.find("100 prompt + generated tokens per second"), std::string::npos) << r->message;
  EXPECT_FALSE(l.Acquire("b", 3, 10, 0.0));  // b's bucket is its own
  EXPECT_TRUE(l.Acquire("a", 4, 10, 0.4));   // -10 at 0.4 s
  EXPECT_FALSE(l.Acquire("a", 5, 10, 0.6));  // +10: paid back
  // A deep debt: Retry-After says how long it takes to pay.
  l.Release(5, 1000, 0.6);  // 10 - 10 - 1000 = -1000
  r = l.Acquire("a", 6, 1, 0.6);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->retry_after_s, 10);
  EXPECT_TRUE(l.CheckIntegrity().ok());
}

TEST(TenantLimiter, DefaultBurstIsTenSecondsOfTheRate) {
  TenantLimiter l({.tokens_per_s = 10}, {});
  EXPECT_FALSE(l.Acquire("a", 1, 99, 0.0));  // 100 -> 1
  EXPECT_FALSE(l.Acquire("a", 2, 5, 0.0));   // 1 -> -4
  EXPECT_TRUE(l.Acquire("a", 3, 1, 0.0));
}

TEST(TenantLimiter, ValidateNamesTheField) {
  EXPECT_TRUE(TenantLimit{}.Validate("x").ok());
  EXPECT_NE(TenantLimit{.max_concurrent = -1}.Validate("tenants[0]").message().find("tenants[0]: max_concurrent"),
            std::string::npos);
  EXPECT_NE(TenantLimit{.tokens_per_s = -1}.Validate("f").message().find("tokens_per_s"), std::string::npos);
  EXPECT_NE(TenantLimit{.token_burst = 5}.Validate("f").message().find("token_burst needs tokens_per_s"),
            std::string::npos);
}

// Random acquire/release traffic over three tenants: the books balance after every step and
// no tenant ever exceeds its concurrency.
TEST(TenantLimiter, RandomisedBooksBalance) {
  TenantLimiter l({.max_concurrent = 3, .tokens_per_s = 50}, {{"t2", {.max_concurrent = 5}}});
  std::mt19937 rng(7);
  std::vector<int64_t> live;
  double now = 0;
  for (int64_t id = 0; id < 5000; ++id) {
    now += 0.01 * (rng() % 10);
    const std::string tenant = fmt::format("t{}", rng() % 3);  // not "t" + std::string: GCC 12's -Wrestrict false positive
    if (!l.Acquire(tenant, id, rng() % 40, now)) live.push_back(id);
    EXPECT_LE(l.in_flight(tenant), l.LimitOf(tenant).max_concurrent);
    if (!live.empty() && rng() % 2 == 0) {
      const size_t k = rng() % live.size();
      l.Release(live[k], rng() % 40, now);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
    ASSERT_TRUE(l.CheckIntegrity().ok()) << l.CheckIntegrity().message();
  }
}

}  // namespace
}  // namespace tarmac::server
