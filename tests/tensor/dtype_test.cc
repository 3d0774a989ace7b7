#include "tensor/dtype.h"

#include <gtest/gtest.h>

namespace tarmac {
namespace {

TEST(DTypeTest, KnownSizes) {
  EXPECT_EQ(Traits(DType::kQ8_0).type_size, 34);
  EXPECT_EQ(Traits(DType::kQ4_0).type_size, 18);
  EXPECT_EQ(Traits(DType::kQ4_K).type_size, 144);
  EXPECT_EQ(Traits(DType::kQ6_K).type_size, 210);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 512), 288);
  EXPECT_EQ(RowBytes(DType::kF16, 7), 14);
  EXPECT_FALSE(GetDTypeTraits(4).has_value());  // removed Q4_2
  EXPECT_FALSE(GetDTypeTraits(1000).has_value());
}

TEST(DTypeTest, Names) {
  EXPECT_EQ(DTypeFromName("Q4_K"), DType::kQ4_K);
  EXPECT_EQ(DTypeFromName("q8_0"), DType::kQ8_0);
  EXPECT_EQ(DTypeFromName("BF16"), DType::kBF16);
  EXPECT_FALSE(DTypeFromName("q9_0").has_value());
  EXPECT_EQ(DTypeName(DType::kQ6_K), "q6_K");
}

}  // namespace
}  // namespace tarmac
