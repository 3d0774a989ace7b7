// Exhaustive F32 -> F16 / BF16 row conversion: every one of the 2^32 float bit patterns, SIMD
// against the scalar reference (tensor/fp16.h), bit for bit. Runs on the best target (F16C
// hardware path on x86) and on SSE4 (integer path) when the CPU has both. Label: slow.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hwy/targets.h"
#include "kernels/ops.h"
#include "kernels/ops_ref.h"

namespace tarmac::kernels {
namespace {

std::vector<int64_t> TargetsToTest() {
  const auto all = hwy::SupportedAndGeneratedTargets();
  std::vector<int64_t> out;
  if (!all.empty()) out.push_back(all.front());  // best
  for (int64_t t : all) {
    if (t == HWY_SSE4 && t != out.front()) out.push_back(t);
  }
  return out;
}

class ConvertExhaustive : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  }

  template <class Fast, class Ref>
  void CheckAll(Fast fast, Ref ref) {
    constexpr int64_t kChunk = 1 << 16;
    std::vector<float> in(kChunk);
    std::vector<uint16_t> got(kChunk), want(kChunk);
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
      for (int64_t i = 0; i < kChunk; ++i) {
        const uint32_t bits = static_cast<uint32_t>(base + i);
        std::memcpy(&in[i], &bits, 4);
      }
      fast(in.data(), got.data(), kChunk);
      ref(in.data(), want.data(), kChunk);
      if (std::memcmp(got.data(), want.data(), kChunk * sizeof(uint16_t)) != 0) {
        for (int64_t i = 0; i < kChunk; ++i) {
          ASSERT_EQ(got[i], want[i]) << "input bits 0x" << std::hex << (base + i);
        }
      }
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Targets, ConvertExhaustive, ::testing::ValuesIn(TargetsToTest()),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string(hwy::TargetName(info.param));
                         });

TEST_P(ConvertExhaustive, F32ToF16) { CheckAll(ConvertF32ToF16, ref::ConvertF32ToF16); }
TEST_P(ConvertExhaustive, F32ToBF16) { CheckAll(ConvertF32ToBF16, ref::ConvertF32ToBF16); }

}  // namespace
}  // namespace tarmac::kernels
