// Dot/MatVec (SIMD, threaded) vs the double-precision scalar references.
//
// Tolerance: |got - ref| <= 1e-4 · sum_k |w_k x_k| (+1e-30). The kernels accumulate in f32
// (several accumulators, per-block partial sums), and fold block offsets (-8, -32, Q4_K mins)
// through per-block sums of x; their error is a few ulps of the largest partial sums, i.e.
// ~sqrt(K)·2^-24 ≈ 4e-6 relative for K ≈ 4k, and at most ~K/16·2^-24 ≈ 2e-5 in the worst case
// (offset terms are at most ~2× the weight terms for these formats). 1e-4 leaves margin
// and still catches any wrong element (one wrong weight of K moves the result by ~1/K ≫ 1e-4
// only for K < 10^4 — which covers every shape here).
#include "kernels/matvec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {
namespace {

using testing::kMatVecTypes;
using testing::RandomActivations;
using testing::RandomMatrix;
using testing::TestCols;

// sum_k |w_k x_k| of row r, from the reference dequantization.
double AbsDot(const MatrixView& w, int64_t r, const float* x) {
  std::vector<float> wf(w.cols);
  DequantizeRowRef(w.type, w.row(r), wf.data(), w.cols);
  double s = 0;
  for (int64_t k = 0; k < w.cols; ++k) s += std::fabs(static_cast<double>(wf[k]) * x[k]);
  return s;
}

constexpr double kRelTol = 1e-4;

TEST(MatVecTest, DotMatchesReference) {
  testing::ForEachTarget([](const char* target) {
  std::mt19937 rng(1);
  for (DType type : kMatVecTypes) {
    for (int64_t n : TestCols(type)) {
      const auto m = RandomMatrix(type, 1, n, RowBytes(type, n), rng);
      const auto x = RandomActivations(n, rng);
      const MatrixView w = MatrixView::Dense(type, m.data(), 1, n);
      const double ref = DotRef(type, m.data(), x.data(), n);
      const float got = Dot(type, m.data(), x.data(), n);
      EXPECT_NEAR(got, ref, kRelTol * AbsDot(w, 0, x.data()) + 1e-30)
          << target << " " << DTypeName(type) << " n=" << n;
    }
  }
  });
}

TEST(MatVecTest, MatVecMatchesReferenceAllShapesAndThreads) {
  std::mt19937 rng(2);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  testing::ForEachTarget([&](const char* target) {
  for (DType type : kMatVecTypes) {
    for (int64_t n : TestCols(type)) {
      for (int64_t rows : {1, 3, 7, 17, 64, 130}) {
        // Every other shape uses a padded (non-dense) row stride.
        const bool padded = (rows + n) % 2 == 1;
        const int64_t stride = RowBytes(type, n) + (padded ? 40 : 0);
        const auto m = RandomMatrix(type, rows, n, stride, rng);
        const auto x = RandomActivations(n, rng);
        const MatrixView w{type, m.data(), rows, n, stride};
        std::vector<float> ref(rows);
        MatVecRef(w, x.data(), ref.data());
        for (ThreadPool* pool : pools) {
          std::vector<float> y(rows, NAN);
          MatVec(w, x.data(), y.data(), pool);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_NEAR(y[r], ref[r], kRelTol * AbsDot(w, r, x.data()) + 1e-30)
                << target << " " << DTypeName(type) << " rows=" << rows << " n=" << n << " r=" << r
                << " threads=" << (pool ? pool->num_threads() : 1);
          }
        }
      }
    }
  }
  });
}

TEST(MatVecTest, ZeroRowsAndCols) {
  std::vector<float> y(3, 1.0f);
  const float x = 1.0f;
  MatVec(MatrixView{DType::kQ4_0, nullptr, 0, 32, 18}, &x, y.data(), nullptr);
  MatVec(MatrixView{DType::kF32, nullptr, 3, 0, 0}, &x, y.data(), nullptr);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tarmac::kernels
