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

TEST(Admission, RunsQueuesAndRejects) {
  Admission a({/*max_concurrent=*/2, /*max_queue=*/2, /*max_queue_tokens=*/100});
  EXPECT_EQ(a.Arrive(1, 10, 0), Admission::Decision::kRun);
  EXPECT_EQ(a.Arrive(2, 10, 0), Admission::Decision::kRun);
  EXPECT_EQ(a.Arrive(3, 10, 0), Admission::Decision::kQueued);
  EXPECT_EQ(a.Arrive(4, 10, -1), Admission::Decision::kQueued);
  EXPECT_EQ(a.Arrive(5, 10, 0), Admission::Decision::kRejected);  // queue full (requests)
  EXPECT_EQ(a.queued_tokens(), 20);
  // The more important request (priority -1) starts first.
  EXPECT_EQ(a.Finish(1), std::vector<int64_t>{4});
  EXPECT_EQ(a.running(), 2);
  a.Withdraw(3);
  EXPECT_EQ(a.queued(), 0);
  EXPECT_EQ(a.queued_tokens(), 0);
  EXPECT_TRUE(a.Finish(2).empty());
  EXPECT_EQ(a.running(), 1);
}

TEST(Admission, TokenBoundRejects) {
  Admission a({1, 10, 50});
  EXPECT_EQ(a.Arrive(1, 1000, 0), Admission::Decision::kRun);  // running requests are not bounded by tokens
  EXPECT_EQ(a.Arrive(2, 40, 0), Admission::Decision::kQueued);
  EXPECT_EQ(a.Arrive(3, 20, 0), Admission::Decision::kRejected);
  EXPECT_EQ(a.Finish(1), std::vector<int64_t>{2});
}

TEST(Admission, ZeroQueueRejectsWhenFull) {
  Admission a({1, 0, 1000});
  EXPECT_EQ(a.Arrive(1, 1, 0), Admission::Decision::kRun);
  EXPECT_EQ(a.Arrive(2, 1, 0), Admission::Decision::kRejected);
}

}  // namespace
}  // namespace tarmac::server
