// MatVecQ6K (Q6_K GGUF rows × 1..16 tokens, int8 activations, AVX2) against MatVecQ6KRef, the
// scalar reference with the same activation quantization and integers, element by element
// from the GGUF layout. Only the f32 accumulation differs, so with
// S = sum_k |w_k| · |d_b q_k| (the dequantized activations) the test checks the header's
//   |y - ref| <= (K/16 + 16) · 2^-23 · S + 1e-30.
// Also: the reference itself against the dequantized weights (its layout decoding), the
// activation-rounding bound against the exact product, a token's result independent of the
// token count, the thread count and the row stride, no read past the matrix, zero and
// non-finite activations, and MatMul's dispatch of 1..16 Q6_K tokens to it.
#include "kernels/matvec_q6k.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_q6k.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {
namespace {

using testing::GuardedCopy;
using testing::Int8ActivationMagnitude;
using testing::RandomActivations;
using testing::RandomMatrix;

constexpr DType kQ6 = DType::kQ6_K;

double OrderTolerance(const MatrixView& w, int64_t r, const float* x) {
  return (w.cols / 16.0 + 16.0) * std::ldexp(1.0, -23) * Int8ActivationMagnitude(w, r, x) + 1e-30;
}

void SkipWithoutKernel() {
  if (!MatVecQ6KAvailable()) GTEST_SKIP() << "no AVX2: MatMul takes MatVec for Q6_K";
}

// The reference decodes the layout right: with exact activations (x whose 32-blocks quantize
// without rounding) it equals the product with the dequantized weights.
TEST(MatVecQ6KTest, ReferenceMatchesDequantizedWeights) {
  std::mt19937 rng(41);
  const int64_t rows = 5, cols = 512;
  const auto m = RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng);
  const MatrixView w{kQ6, m.data(), rows, cols, RowBytes(kQ6, cols)};
  std::vector<float> x(cols);
  for (int64_t k = 0; k < cols; ++k) x[k] = static_cast<float>(static_cast<int>(rng() % 255) - 127);
  for (int64_t b = 0; b < cols / 32; ++b) x[32 * b] = 127.0f;  // every block's step is exactly 1
  std::vector<float> ref(rows), wf(cols);
  MatVecQ6KRef(w, x.data(), 1, ref.data());
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRowRef(kQ6, w.row(r), wf.data(), cols);
    double exact = 0;
    for (int64_t k = 0; k < cols; ++k) exact += double(wf[k]) * x[k];
    EXPECT_NEAR(ref[r], exact, 1e-5 * (1.0 + std::fabs(exact))) << "r=" << r;
  }
}

TEST(MatVecQ6KTest, MatchesReferenceAcrossShapesTokensAndThreads) {
  SkipWithoutKernel();
  std::mt19937 rng(42);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int i = 0;
  for (int64_t cols : {256, 512, 768, 2304}) {
    for (int64_t rows : {1, 2, 7, 33, 130}) {
      for (int64_t nt : {1, 2, 3, 4, 5, 8, 16}) {
        const int64_t stride = RowBytes(kQ6, cols) + (i % 3 == 1 ? 14 : i % 3 == 0 ? 46 : 0);
        const auto m = RandomMatrix(kQ6, rows, cols, stride, rng);
        const MatrixView w{kQ6, m.data(), rows, cols, stride};
        std::vector<float> x(nt * cols);
        for (int64_t t = 0; t < nt; ++t) {
          const auto xt = RandomActivations(cols, rng);
          std::copy(xt.begin(), xt.end(), x.begin() + t * cols);
        }
        std::vector<float> ref(nt * rows), got(nt * rows + 1, NAN), one(rows, NAN);
        got[nt * rows] = 12345.0f;  // must stay
        MatVecQ6KRef(w, x.data(), nt, ref.data());
        MatVecQ6K(w, x.data(), nt, got.data(), pools[i % 3]);
        ASSERT_EQ(got[nt * rows], 12345.0f);
        for (int64_t t = 0; t < nt; ++t) {
          MatVecQ6K(w, x.data() + t * cols, 1, one.data(), nullptr);
          for (int64_t r = 0; r < rows; ++r) {
            const float g = got[t * rows + r];
            ASSERT_LE(std::fabs(double(g) - ref[t * rows + r]),
                      OrderTolerance(w, r, x.data() + t * cols))
                << "rows=" << rows << " cols=" << cols << " tokens=" << nt << " t=" << t
                << " r=" << r << " got=" << g << " ref=" << ref[t * rows + r];
            ASSERT_EQ(g, one[r]) << "the token count or threads changed the result: t=" << t
                                 << " r=" << r;
          }
        }
        ++i;
      }
    }
  }
}

// Against the exact product: only the activation rounding (half a step of each 32-block's x)
// and f32 accumulation.
TEST(MatVecQ6KTest, ErrorAgainstTheExactProductIsTheActivationRounding) {
  SkipWithoutKernel();
  std::mt19937 rng(43);
  const int64_t rows = 40, cols = 2048;
  const auto m = RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng);
  const MatrixView w{kQ6, m.data(), rows, cols, RowBytes(kQ6, cols)};
  const auto x = RandomActivations(cols, rng);
  std::vector<float> got(rows), wf(cols);
  MatVecQ6K(w, x.data(), 1, got.data(), nullptr);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRowRef(kQ6, w.row(r), wf.data(), cols);
    double exact = 0, bound = 0;
    for (int64_t b = 0; b < cols / 32; ++b) {
      double mx = 0, sw = 0;
      for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
        exact += double(wf[k]) * x[k];
        mx = std::max(mx, double(std::fabs(x[k])));
        sw += std::fabs(wf[k]);
      }
      bound += mx / 254.0 * sw;
    }
    EXPECT_LE(std::fabs(got[r] - exact), 1.001 * bound + OrderTolerance(w, r, x.data())) << "r=" << r;
  }
}

// The matrix ends exactly where readable memory ends: any read past the last row faults.
TEST(MatVecQ6KTest, ReadsNothingPastTheMatrix) {
  SkipWithoutKernel();
  std::mt19937 rng(44);
  for (int64_t cols : {256, 768}) {
    const int64_t rows = 9, bytes = rows * RowBytes(kQ6, cols);
    const GuardedCopy data(RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng), bytes);
    ASSERT_NE(data.data(), nullptr);
    const MatrixView w{kQ6, data.data(), rows, cols, RowBytes(kQ6, cols)};
    const auto x = RandomActivations(cols, rng);
    std::vector<float> ref(rows), got(rows);
    MatVecQ6KRef(w, x.data(), 1, ref.data());
    MatVecQ6K(w, x.data(), 1, got.data(), nullptr);
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_LE(std::fabs(double(got[r]) - ref[r]), OrderTolerance(w, r, x.data()));
  }
}

TEST(MatVecQ6KTest, ZeroAndNonFiniteActivations) {
  SkipWithoutKernel();
  std::mt19937 rng(45);
  const int64_t rows = 6, cols = 512;
  const auto m = RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng);
  const MatrixView w{kQ6, m.data(), rows, cols, RowBytes(kQ6, cols)};
  std::vector<float> x(cols, 0.0f), y(rows, NAN);
  MatVecQ6K(w, x.data(), 1, y.data(), nullptr);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  x = RandomActivations(cols, rng);
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    x[300] = bad;
    MatVecQ6K(w, x.data(), 1, y.data(), nullptr);
    for (float v : y) EXPECT_TRUE(std::isnan(v)) << bad;
  }
}

// MatMul sends fewer than kQ6KGemmMinTokens Q6_K tokens here at avx2 and above (more go to
// MatMulQ6K; at the amx level, 1..16 of a matrix without a copy come here), and to MatVec /
// MatVecMulti below.
TEST(MatVecQ6KTest, MatMulDispatchesQ6KTokensHere) {
  std::mt19937 rng(46);
  ThreadPool pool2(2);
  const int64_t rows = 21, cols = 512;
  const auto m = RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng);
  const MatrixView w{kQ6, m.data(), rows, cols, RowBytes(kQ6, cols)};
  testing::ForEachIsa([&](const char* isa) {
    SCOPED_TRACE(isa);
    for (int64_t nt : {int64_t{1}, int64_t{2}, kQ6KGemmMinTokens - 1, kQ6KGemmMinTokens,
                       int64_t{16}, int64_t{17}}) {
      const MatMulKernel k = ChooseMatMulKernel({kQ6, nt, PreparedLayout::kNone});
      const bool row_by_row = nt < kQ6KGemmMinTokens || (IsaAtLeast(Isa::kAmx) && nt <= kQ6KMaxTokens);
      EXPECT_EQ(k == MatMulKernel::kMatVecQ6K, MatVecQ6KAvailable() && row_by_row) << nt;
      if (k != MatMulKernel::kMatVecQ6K) continue;
      std::vector<float> x(nt * cols), via(nt * rows), direct(nt * rows);
      for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
      MatMul(w, x.data(), nt, via.data(), &pool2);
      MatVecQ6K(w, x.data(), nt, direct.data(), nullptr);
      for (int64_t j = 0; j < nt * rows; ++j) ASSERT_EQ(via[j], direct[j]);
    }
  });
}

}  // namespace
}  // namespace tarmac::kernels
