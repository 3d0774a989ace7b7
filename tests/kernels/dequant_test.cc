// DequantizeRow (SIMD) must equal DequantizeRowRef bit for bit for every compute dtype.
#include "kernels/dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {
namespace {

using testing::FillRandomRow;

TEST(DequantTest, BitExactVsReferenceAllTypes) {
  testing::ForEachTarget([](const char* target) {
  std::mt19937 rng(123);
  for (uint32_t id = 0; id < 64; ++id) {
    if (!GetDTypeTraits(id) || !IsComputeType(static_cast<DType>(id))) continue;
    const DType type = static_cast<DType>(id);
    const int64_t bs = Traits(type).block_size;
    for (int64_t blocks : {1, 2, 3, 5, 16, 17, 33}) {
      const int64_t n = blocks * bs;
      std::vector<uint8_t> src(RowBytes(type, n));
      for (int rep = 0; rep < 4; ++rep) {
        FillRandomRow(type, n, rng, src.data());
        std::vector<float> got(n, -1.0f), want(n, -2.0f);
        DequantizeRow(type, src.data(), got.data(), n);
        DequantizeRowRef(type, src.data(), want.data(), n);
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), n * sizeof(float)))
            << target << " " << DTypeName(type) << " n=" << n;
      }
    }
  }
  });
}

// Every f16 and bf16 bit pattern, including subnormals, infinities and NaNs. The hardware
// conversion quiets signalling NaNs, so NaNs are compared by class only.
TEST(DequantTest, AllHalfBitPatterns) {
  testing::ForEachTarget([](const char* target) {
  std::vector<uint16_t> src(65536);
  for (int i = 0; i < 65536; ++i) src[i] = static_cast<uint16_t>(i);
  for (DType type : {DType::kF16, DType::kBF16}) {
    std::vector<float> got(65536), want(65536);
    DequantizeRow(type, src.data(), got.data(), 65536);
    DequantizeRowRef(type, src.data(), want.data(), 65536);
    for (int i = 0; i < 65536; ++i) {
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(got[i])) << target << " " << i;
      } else {
        ASSERT_EQ(0, std::memcmp(&got[i], &want[i], 4))
            << target << " " << DTypeName(type) << " bits " << i;
      }
    }
  }
  });
}

TEST(DequantTest, EmptyRow) { DequantizeRow(DType::kQ4_K, nullptr, nullptr, 0); }

}  // namespace
}  // namespace tarmac::kernels

namespace tarmac::kernels {
namespace {
// The per-target sweeps above are only meaningful if more than one target runs here.
TEST(DequantTest, SeveralTargetsAreTested) {
  std::vector<std::string> names;
  testing::ForEachTarget([&](const char* target) { names.push_back(target); });
  std::string all;
  for (const auto& n : names) all += n + " ";
  std::printf("targets tested: %s\n", all.c_str());
  EXPECT_GE(names.size(), 1u);
}
}  // namespace
}  // namespace tarmac::kernels
