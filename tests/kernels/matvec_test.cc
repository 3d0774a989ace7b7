// Dot/MatVec (SIMD, threaded) vs the double-precision scalar references.
//
// Tolerance per output (testing::MatVecTolerance): 1e-4 · sum_k |w_k x_k| + (quantized weight
// types only) 1.05 · sum over 32-blocks b of (max_b |x| / 65534) · sum_{k in b} |w_k|.
// - f32 part: the kernels accumulate in f32 with several accumulators and per-block partial
//   sums; the error is a few ulps of the partial sums, ~sqrt(K)·2^-24 ≈ 4e-6 relative for
//   K ≈ 4k, ≤ ~K/16·2^-24 ≈ 2e-5 in the worst case; 1e-4 leaves margin.
// - activation quantization: for Q8_0/Q4_0/Q4_K/Q6_K weights x is rounded to int16 per
//   32-element block (step max_b|x|/32767), so each x_k moves by at most half a step; the
//   second term is exactly that bound (5% slack for the f32 rounding of x·(32767/max)).
//   Relative to sum|w x| it is ~1e-5 for even x, larger when one block mixes magnitudes
//   (the test's x spans four decades on purpose).
#include "kernels/matvec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

double Tolerance(const MatrixView& w, int64_t r, const float* x) {
  std::vector<float> wf(w.cols);
  DequantizeRowRef(w.type, w.row(r), wf.data(), w.cols);
  return testing::MatVecTolerance(w.type, wf.data(), x, w.cols);
}

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
      EXPECT_NEAR(got, ref, Tolerance(w, 0, x.data()))
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
            ASSERT_NEAR(y[r], ref[r], Tolerance(w, r, x.data()))
                << target << " " << DTypeName(type) << " rows=" << rows << " n=" << n << " r=" << r
                << " threads=" << (pool ? pool->num_threads() : 1);
          }
        }
      }
    }
  }
  });
}

// The types without a dot kernel of their own (decoded rows, then the f32 dot): every one
// against the reference, odd block counts, padded strides, 1-2 threads.
TEST(MatVecTest, DequantizedTypesMatchReference) {
  std::mt19937 rng(9);
  ThreadPool pool2(2);
  for (DType type : testing::kDequantizedTypes) {
    const int64_t bs = Traits(type).block_size;
    for (int64_t n : {bs, 3 * bs, (bs == 32 ? 17 : 5) * bs}) {
      for (int64_t rows : {1, 7, 33}) {
        const int64_t stride = RowBytes(type, n) + (rows % 2 ? 40 : 0);
        const auto m = RandomMatrix(type, rows, n, stride, rng);
        const auto x = RandomActivations(n, rng);
        const MatrixView w{type, m.data(), rows, n, stride};
        std::vector<float> ref(rows), y(rows, NAN);
        MatVecRef(w, x.data(), ref.data());
        MatVec(w, x.data(), y.data(), rows > 1 ? &pool2 : nullptr);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_NEAR(y[r], ref[r], Tolerance(w, r, x.data()))
              << DTypeName(type) << " rows=" << rows << " n=" << n << " r=" << r;
        }
        EXPECT_NEAR(Dot(type, m.data(), x.data(), n), ref[0], Tolerance(w, 0, x.data()));
      }
    }
  }
}

// 1..4 matrices of one dtype with one x in one parallel region: per matrix bit-identical to
// MatVec, every dtype and level, 1-3 threads, padded strides, rows that split unevenly.
TEST(MatVecTest, SharedEqualsOneByOne) {
  std::mt19937 rng(5);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int k = 0;
  testing::ForEachTarget([&](const char* target) {
    for (DType type : kMatVecTypes) {
      const int64_t n = TestCols(type).back();
      const int64_t rows[4] = {17, 64, 5, 130};
      std::vector<std::vector<uint8_t>> mats;
      std::vector<MatrixView> ws;
      for (int i = 0; i < 4; ++i) {
        const int64_t stride = RowBytes(type, n) + (i % 2 ? 40 : 0);
        mats.push_back(RandomMatrix(type, rows[i], n, stride, rng));
        ws.push_back(MatrixView{type, mats.back().data(), rows[i], n, stride});
      }
      const MatrixView* wp[4] = {&ws[0], &ws[1], &ws[2], &ws[3]};
      const auto x = RandomActivations(n, rng);
      for (int m = 1; m <= 4; ++m) {
        ThreadPool* pool = pools[k++ % 3];
        std::vector<float> shared[4], single[4];
        float* yp[4];
        for (int i = 0; i < m; ++i) {
          shared[i].assign(rows[i], NAN);
          single[i].assign(rows[i], NAN);
          yp[i] = shared[i].data();
          MatVec(ws[i], x.data(), single[i].data(), pool);
        }
        MatVecShared(wp, yp, m, x.data(), pool);
        for (int i = 0; i < m; ++i) {
          ASSERT_EQ(0, std::memcmp(shared[i].data(), single[i].data(), rows[i] * 4))
              << target << " " << DTypeName(type) << " matrices " << m << " matrix " << i;
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
