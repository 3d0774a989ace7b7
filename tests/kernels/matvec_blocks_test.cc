// MatVecBlocks (the other block types' GGUF rows × 1..16 tokens, int8 activations, AVX2)
// against MatVecBlocksRef, the reference decode times the same quantized activations in
// double. Only the f32 products and sums of the per-16 terms differ, so with
// S = sum_k |w_k| · |d_b q_k| the test checks the header's
//   |y - ref| <= (K/4 + 32) · 2^-23 · S + 1e-30.
// Also: a token's result independent of the token count, the thread count and the row stride;
// no read past the matrix; the largest weights against the largest activations (no int16
// saturation in vpmaddubsw); and MatMul's dispatch of 1..16 tokens of these types here.
#include "kernels/matvec_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {
namespace {

using testing::GuardedCopy;
using testing::Int8ActivationMagnitude;
using testing::RandomActivations;
using testing::RandomMatrix;

constexpr DType kTypes[] = {DType::kQ2_K,  DType::kQ3_K, DType::kQ5_K, DType::kIQ4_XS,
                            DType::kIQ4_NL, DType::kMXFP4, DType::kQ4_1, DType::kQ5_0,
                            DType::kQ5_1,  DType::kTQ1_0, DType::kTQ2_0, DType::kIQ2_XXS,
                            DType::kIQ2_XS, DType::kIQ2_S, DType::kIQ3_XXS, DType::kIQ3_S,
                            DType::kIQ1_S, DType::kIQ1_M};

double OrderTolerance(const MatrixView& w, int64_t r, const float* x) {
  return (w.cols / 4.0 + 32.0) * std::ldexp(1.0, -23) * Int8ActivationMagnitude(w, r, x) + 1e-30;
}

void SkipWithoutKernel() {
  if (!MatVecBlocksAvailable()) GTEST_SKIP() << "no AVX2: MatMul takes MatVec for these types";
}

TEST(MatVecBlocksTest, MatchesReferenceAcrossTypesShapesTokensAndThreads) {
  SkipWithoutKernel();
  std::mt19937 rng(42);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int i = 0;
  for (DType type : kTypes) {
    const int64_t bs = Traits(type).block_size;
    // Blocks of 32: also rows that end inside a unit of 256.
    const std::vector<int64_t> cols_list =
        bs == 32 ? std::vector<int64_t>{32, 96, 256, 17 * 32} : std::vector<int64_t>{256, 768};
    for (int64_t cols : cols_list) {
      for (int64_t rows : {1, 7, 33}) {
        for (int64_t nt : {1, 2, 5, 16}) {
          const int64_t stride = RowBytes(type, cols) + (i % 3 == 1 ? 14 : i % 3 == 0 ? 46 : 0);
          const auto m = RandomMatrix(type, rows, cols, stride, rng);
          const MatrixView w{type, m.data(), rows, cols, stride};
          std::vector<float> x(nt * cols);
          for (int64_t t = 0; t < nt; ++t) {
            const auto xt = RandomActivations(cols, rng);
            std::copy(xt.begin(), xt.end(), x.begin() + t * cols);
          }
          std::vector<float> ref(nt * rows), got(nt * rows + 1, NAN), one(rows, NAN);
          got[nt * rows] = 12345.0f;  // must stay
          MatVecBlocksRef(w, x.data(), nt, ref.data());
          MatVecBlocks(w, x.data(), nt, got.data(), pools[i % 3]);
          ASSERT_EQ(got[nt * rows], 12345.0f);
          for (int64_t t = 0; t < nt; ++t) {
            MatVecBlocks(w, x.data() + t * cols, 1, one.data(), nullptr);
            for (int64_t r = 0; r < rows; ++r) {
              const float g = got[t * rows + r];
              ASSERT_LE(std::fabs(double(g) - ref[t * rows + r]),
                        OrderTolerance(w, r, x.data() + t * cols))
                  << DTypeName(type) << " rows=" << rows << " cols=" << cols << " tokens=" << nt
                  << " t=" << t << " r=" << r << " got=" << g << " ref=" << ref[t * rows + r];
              ASSERT_EQ(g, one[r]) << DTypeName(type) << ": the token count or threads changed "
                                   << "the result: t=" << t << " r=" << r;
            }
          }
          ++i;
        }
      }
    }
  }
}

// The largest weight magnitude each type decodes to (IQ4's -127, Q5_K's 31, ...) against
// activations of +-127 everywhere: any int16 saturation in the pair sums would show.
TEST(MatVecBlocksTest, IntegerExtremesDoNotSaturate) {
  SkipWithoutKernel();
  for (DType type : kTypes) {
    const int64_t cols = 512;
    std::vector<float> big(cols);
    // Values on the extremes of each type's range: the quantizers map the largest magnitude
    // to the outermost level.
    for (int64_t k = 0; k < cols; ++k) big[k] = (k % 3 == 0) ? -1.0f : (k % 3 == 1 ? 1.0f : -0.9f);
    std::vector<uint8_t> row(RowBytes(type, cols));
    ASSERT_TRUE(QuantizeRowRef(type, big.data(), row.data(), cols).ok());
    const MatrixView w{type, row.data(), 1, cols, RowBytes(type, cols)};
    for (float sign : {1.0f, -1.0f}) {
      std::vector<float> x(cols);
      for (int64_t k = 0; k < cols; ++k) x[k] = sign * (big[k] < 0 ? -1.0f : 1.0f);
      float got = NAN, ref = NAN;
      MatVecBlocks(w, x.data(), 1, &got, nullptr);
      MatVecBlocksRef(w, x.data(), 1, &ref);
      EXPECT_LE(std::fabs(double(got) - ref), OrderTolerance(w, 0, x.data()))
          << DTypeName(type) << " sign " << sign << " got " << got << " ref " << ref;
    }
  }
}

// The matrix ends exactly where readable memory ends: any read past the last row faults.
TEST(MatVecBlocksTest, ReadsNothingPastTheMatrix) {
  SkipWithoutKernel();
  std::mt19937 rng(44);
  for (DType type : kTypes) {
    const int64_t cols = Traits(type).block_size == 32 ? 5 * 32 : 256;
    const int64_t rows = 9, bytes = rows * RowBytes(type, cols);
    const GuardedCopy data(RandomMatrix(type, rows, cols, RowBytes(type, cols), rng), bytes);
    ASSERT_NE(data.data(), nullptr);
    const MatrixView w{type, data.data(), rows, cols, RowBytes(type, cols)};
    const auto x = RandomActivations(cols, rng);
    std::vector<float> ref(rows), got(rows);
    MatVecBlocksRef(w, x.data(), 1, ref.data());
    MatVecBlocks(w, x.data(), 1, got.data(), nullptr);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_LE(std::fabs(double(got[r]) - ref[r]), OrderTolerance(w, r, x.data()))
          << DTypeName(type);
    }
  }
}

TEST(MatVecBlocksTest, MatMulDispatchesTheseTypesHere) {
  SkipWithoutKernel();
  for (DType type : kTypes) {
    ASSERT_TRUE(MatVecBlocksSupports(type));
    for (int64_t n : {1, 2, 16}) {
      EXPECT_EQ(ChooseMatMulKernel({type, n, PreparedLayout::kNone}, Isa::kAvx2),
                MatMulKernel::kMatVecBlocks)
          << DTypeName(type) << " n=" << n;
    }
    EXPECT_NE(ChooseMatMulKernel({type, 17, PreparedLayout::kNone}, Isa::kAvx2),
              MatMulKernel::kMatVecBlocks);
  }
  EXPECT_FALSE(MatVecBlocksSupports(DType::kQ6_K));
  EXPECT_FALSE(MatVecBlocksSupports(DType::kQ4_K));
}

}  // namespace
}  // namespace tarmac::kernels
