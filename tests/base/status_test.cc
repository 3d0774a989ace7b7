#include "base/status.h"

#include <gtest/gtest.h>

namespace tarmac {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("{} is odd", x);
  return x / 2;
}

Result<int> Quarter(int x) {
  TARMAC_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = DataLoss("offset {} past end", 42);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "DATA_LOSS: offset 42 past end");
}

TEST(StatusTest, FieldAndReasonTravelWithTheError) {
  Status s = InvalidField("top_p", "top_p must be in (0, 1], got {}", 1.5);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.field(), "top_p");
  EXPECT_EQ(s.reason(), "");
  EXPECT_EQ(s.message(), "top_p must be in (0, 1], got 1.5");
  Status t = s.WithField("max_tokens", "context_length_exceeded");
  EXPECT_EQ(t.field(), "max_tokens");
  EXPECT_EQ(t.reason(), "context_length_exceeded");
  EXPECT_EQ(t.message(), s.message());
  Result<int> r = t;
  EXPECT_EQ(r.status().field(), "max_tokens");  // a Result keeps them
  EXPECT_EQ(Status::Ok().field(), "");
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
  Result<int> bad(Status::Ok());  // misuse becomes an internal error, never a fake value
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace tarmac
