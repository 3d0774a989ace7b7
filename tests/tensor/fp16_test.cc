#include "tensor/fp16.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace tarmac {
namespace {

TEST(Fp16Test, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f))));
      continue;
    }
    ASSERT_EQ(F32ToF16(f), h) << h;
  }
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xc000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(F32ToF16(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(F32ToF16(2.9802322e-8f), 0x0000);  // exactly half of it: ties to even
  EXPECT_EQ(F32ToF16(1.0f + 1.0f / 2048), 0x3c00);  // tie rounds to even
  EXPECT_EQ(F32ToF16(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_FLOAT_EQ(F16ToF32(0x3555), 0.33325195f);
}

TEST(Fp16Test, Bf16) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_FLOAT_EQ(BF16ToF32(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(std::nanf("")))));
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = BF16ToF32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(F32ToBF16(f), h);
    }
  }
}

}  // namespace
}  // namespace tarmac
