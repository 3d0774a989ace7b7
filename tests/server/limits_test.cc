// Token bucket, per-tenant rate limiter and admission queue.
#include "server/limits.h"

#include <gtest/gtest.h>

namespace tarmac::server {
namespace {

TEST(TokenBucket, BurstThenRefill) {
  TokenBucket b(/*rate=*/2.0, /*burst=*/3.0);
  EXPECT_TRUE(b.Take(0.0));
  EXPECT_TRUE(b.Take(0.0));
  EXPECT_TRUE(b.Take(0.0));
  EXPECT_FALSE(b.Take(0.0));
  EXPECT_NEAR(b.WaitSeconds(0.0), 0.5, 1e-9);
  EXPECT_TRUE(b.Take(0.5));
  EXPECT_FALSE(b.Take(0.5));
  EXPECT_TRUE(b.Take(100.0));  // refills up to burst only
  EXPECT_TRUE(b.Take(100.0));
  EXPECT_TRUE(b.Take(100.0));
  EXPECT_FALSE(b.Take(100.0));
}

TEST(RateLimiter, TenantsAreIndependent) {
  RateLimiter r(1.0, 1.0);
  int retry = 0;
  EXPECT_TRUE(r.Allow("a", 0.0, &retry));
  EXPECT_FALSE(r.Allow("a", 0.1, &retry));
  EXPECT_GE(retry, 1);
  EXPECT_TRUE(r.Allow("b", 0.1, &retry));
  EXPECT_TRUE(r.Allow("a", 1.1, &retry));
}

TEST(RateLimiter, DisabledAllowsEverything) {
  RateLimiter r(0.0, 0.0);
  int retry = 0;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(r.Allow("a", 0.0, &retry));
}

}  // namespace
}  // namespace tarmac::server
