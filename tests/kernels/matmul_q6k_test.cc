// MatMulQ6K (Q6_K GGUF rows × any number of tokens, int8 activations, AVX2 GEMM) against
// MatMulQ6KRef, the scalar reference with the same activation quantization, integers and f32
// operations in the same order: bit-identical, at every shape (rows that leave partial slabs,
// K of one to nine super-blocks, i.e. partial K chunks), token count (partial token tiles) and
// thread count. Also: the reference against MatVecQ6KRef (the same integers accumulated in
// double) within the header's bound (K/32 + 1) · 2^-24 · sum_k |w_k| · |d_b q_k|; a token's
// result independent of the other tokens; zero and non-finite activations; and MatMul's
// dispatch of kQ6KGemmMinTokens+ Q6_K tokens to it.
#include "kernels/matmul_q6k.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matvec_q6k.h"

namespace tarmac::kernels {
namespace {

using testing::Int8ActivationMagnitude;
using testing::RandomActivations;
using testing::RandomMatrix;

constexpr DType kQ6 = DType::kQ6_K;

void SkipWithoutKernel() {
  if (!MatMulQ6KAvailable()) GTEST_SKIP() << "no AVX2: MatMul takes the f32 panels for Q6_K";
}

std::vector<float> Tokens(int64_t n, int64_t cols, std::mt19937& rng) {
  std::vector<float> x(n * cols);
  for (int64_t t = 0; t < n; ++t) {
    const auto xt = RandomActivations(cols, rng);
    std::copy(xt.begin(), xt.end(), x.begin() + t * cols);
  }
  return x;
}

TEST(MatMulQ6KTest, BitIdenticalToReferenceAcrossShapesTokensAndThreads) {
  SkipWithoutKernel();
  std::mt19937 rng(61);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int i = 0;
  for (int64_t cols : {256, 512, 2304, 4352}) {
    for (int64_t rows : {1, 15, 16, 17, 40, 130}) {
      for (int64_t nt : {1, 3, 4, 5, 17, 33}) {
        const int64_t stride = RowBytes(kQ6, cols) + (i % 2 == 1 ? 14 : 0);
        const auto m = RandomMatrix(kQ6, rows, cols, stride, rng);
        const MatrixView w{kQ6, m.data(), rows, cols, stride};
        const auto x = Tokens(nt, cols, rng);
        std::vector<float> ref(nt * rows), got(nt * rows + 1, NAN);
        MatMulQ6KRef(w, x.data(), nt, ref.data());
        got[nt * rows] = 12345.0f;  // the call writes nothing past y
        MatMulQ6K(w, x.data(), nt, got.data(), pools[i % 3]);
        ASSERT_EQ(got[nt * rows], 12345.0f);
        for (int64_t e = 0; e < nt * rows; ++e) {
          ASSERT_EQ(got[e], ref[e]) << "cols " << cols << " rows " << rows << " tokens " << nt
                                    << " threads " << (i % 3 + 1) << " elem " << e;
        }
        ++i;
      }
    }
  }
}

// The reference's f32 accumulation against the same integers in double (MatVecQ6KRef).
TEST(MatMulQ6KTest, ReferenceWithinTheOrderBoundOfTheDoubleProduct) {
  std::mt19937 rng(62);
  for (int64_t cols : {256, 2304, 8192}) {
    const int64_t rows = 9, nt = 3;
    const auto m = RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng);
    const MatrixView w{kQ6, m.data(), rows, cols, RowBytes(kQ6, cols)};
    const auto x = Tokens(nt, cols, rng);
    std::vector<float> ref(nt * rows), exact(nt * rows);
    MatMulQ6KRef(w, x.data(), nt, ref.data());
    MatVecQ6KRef(w, x.data(), nt, exact.data());
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        const double bound = (cols / 32.0 + 1.0) * std::ldexp(1.0, -24) *
                                 Int8ActivationMagnitude(w, r, x.data() + t * cols) + 1e-30;
        EXPECT_NEAR(ref[t * rows + r], exact[t * rows + r], bound) << cols << " " << t << " " << r;
      }
    }
  }
}

TEST(MatMulQ6KTest, ATokensResultDoesNotDependOnTheOtherTokens) {
  SkipWithoutKernel();
  std::mt19937 rng(63);
  const int64_t rows = 48, cols = 1024, nt = 21;
  const auto m = RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng);
  const MatrixView w{kQ6, m.data(), rows, cols, RowBytes(kQ6, cols)};
  const auto x = Tokens(nt, cols, rng);
  ThreadPool pool(2);
  std::vector<float> all(nt * rows), one(rows);
  MatMulQ6K(w, x.data(), nt, all.data(), &pool);
  for (int64_t t : {0, 4, 20}) {
    MatMulQ6K(w, x.data() + t * cols, 1, one.data(), nullptr);
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(all[t * rows + r], one[r]) << t << " " << r;
  }
}

TEST(MatMulQ6KTest, ZeroAndNonFiniteActivations) {
  SkipWithoutKernel();
  std::mt19937 rng(64);
  const int64_t rows = 20, cols = 512, nt = 18;
  const auto m = RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng);
  const MatrixView w{kQ6, m.data(), rows, cols, RowBytes(kQ6, cols)};
  std::vector<float> x(nt * cols, 0.0f), y(nt * rows, 1.0f);
  x[5 * cols + 300] = NAN;
  x[9 * cols + 3] = INFINITY;
  MatMulQ6K(w, x.data(), nt, y.data(), nullptr);
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      if (t == 5 || t == 9) {
        EXPECT_TRUE(std::isnan(y[t * rows + r])) << t << " " << r;
      } else {
        EXPECT_EQ(y[t * rows + r], 0.0f) << t << " " << r;
      }
    }
  }
}

TEST(MatMulQ6KTest, MatMulRunsItFromItsMinimumTokenCount) {
  SkipWithoutKernel();
  if (CpuSupports(Isa::kAmx)) GTEST_SKIP() << "AMX takes Q6_K batches on its tiles";
  EXPECT_EQ(ChooseMatMulKernel({kQ6, kQ6KGemmMinTokens}), MatMulKernel::kMatMulQ6K);
  EXPECT_EQ(ChooseMatMulKernel({kQ6, 512}), MatMulKernel::kMatMulQ6K);
  EXPECT_EQ(ChooseMatMulKernel({kQ6, kQ6KGemmMinTokens - 1}), MatMulKernel::kMatVecQ6K);
  std::mt19937 rng(65);
  const int64_t rows = 33, cols = 768, nt = 19;
  const auto m = RandomMatrix(kQ6, rows, cols, RowBytes(kQ6, cols), rng);
  const MatrixView w{kQ6, m.data(), rows, cols, RowBytes(kQ6, cols)};
  const auto x = Tokens(nt, cols, rng);
  std::vector<float> ref(nt * rows), got(nt * rows);
  MatMulQ6KRef(w, x.data(), nt, ref.data());
  ThreadPool pool(2);
  MatMul(w, x.data(), nt, got.data(), &pool);
  EXPECT_EQ(got, ref);
}

}  // namespace
}  // namespace tarmac::kernels
