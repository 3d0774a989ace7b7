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
