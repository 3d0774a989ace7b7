// Admission per model under server-wide totals.
#include "router/admission.h"

#include <gtest/gtest.h>

namespace tarmac::router {
namespace {

using D = Admission::Decision;

TEST(Admission, RunsQueuesAndRejects) {
  Admission a({/*max_concurrent=*/2, /*max_queue=*/2, /*max_queue_tokens=*/100});
  EXPECT_EQ(a.Arrive("m", 1, 10, 0), D::kRun);
  EXPECT_EQ(a.Arrive("m", 2, 10, 0), D::kRun);
  EXPECT_EQ(a.Arrive("m", 3, 10, 0), D::kQueued);
  EXPECT_EQ(a.Arrive("m", 4, 10, -1), D::kQueued);
  EXPECT_EQ(a.Arrive("m", 5, 10, 0), D::kRejected);  // queue full (requests)
  EXPECT_EQ(a.queued_tokens(), 20);
  EXPECT_EQ(a.queued("m"), 2);
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
  EXPECT_EQ(a.Arrive("m", 1, 1000, 0), D::kRun);  // running requests are not bounded by tokens
  EXPECT_EQ(a.Arrive("m", 2, 40, 0), D::kQueued);
  EXPECT_EQ(a.Arrive("m", 3, 20, 0), D::kRejected);
  EXPECT_EQ(a.Finish(1), std::vector<int64_t>{2});
}

TEST(Admission, ZeroQueueRejectsWhenFull) {
  Admission a({1, 0, 1000});
  EXPECT_EQ(a.Arrive("m", 1, 1, 0), D::kRun);
  EXPECT_EQ(a.Arrive("m", 2, 1, 0), D::kRejected);
}

TEST(Admission, ModelsShareTheTotalsWithinTheirOwnLimits) {
  Admission a({/*max_concurrent=*/3, /*max_queue=*/10, /*max_queue_tokens=*/1000});
  a.SetModelLimits("small", {/*max_concurrent=*/1, /*max_queue=*/1, 1000});
  EXPECT_EQ(a.Arrive("small", 1, 1, 0), D::kRun);
  EXPECT_EQ(a.Arrive("small", 2, 1, 0), D::kQueued);    // its own slot is taken
  EXPECT_EQ(a.Arrive("small", 3, 1, 0), D::kRejected);  // its own queue is full
  EXPECT_EQ(a.Arrive("large", 4, 1, 0), D::kRun);       // the others still run
  EXPECT_EQ(a.Arrive("large", 5, 1, 0), D::kRun);
  EXPECT_EQ(a.Arrive("large", 6, 1, 5), D::kQueued);    // the totals are full
  EXPECT_EQ(a.running("large"), 2);
  EXPECT_EQ(a.queued("large"), 1);
  // A large request ends: the next that has room starts (small is still at its limit).
  EXPECT_EQ(a.Finish(5), std::vector<int64_t>{6});
  // The small one ends: its queued request starts.
  EXPECT_EQ(a.Finish(1), std::vector<int64_t>{2});
  EXPECT_EQ(a.running(), 3);
  EXPECT_EQ(a.queued(), 0);
}

TEST(Admission, MostImportantQueuedStartsFirstAcrossModels) {
  Admission a({1, 10, 1000});
  EXPECT_EQ(a.Arrive("a", 1, 1, 0), D::kRun);
  EXPECT_EQ(a.Arrive("a", 2, 1, 3), D::kQueued);
  EXPECT_EQ(a.Arrive("b", 3, 1, 1), D::kQueued);
  EXPECT_EQ(a.Arrive("b", 4, 1, 1), D::kQueued);
  EXPECT_EQ(a.Finish(1), std::vector<int64_t>{3});
  EXPECT_EQ(a.Finish(3), std::vector<int64_t>{4});
  EXPECT_EQ(a.Finish(4), std::vector<int64_t>{2});
}

}  // namespace
}  // namespace tarmac::router
