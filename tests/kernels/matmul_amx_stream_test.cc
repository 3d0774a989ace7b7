// MatMulAmxStream (weights split in registers per K step, one token tile) against the
// double-precision reference MatMulRef.
//
// Tolerance: |got - ref| <= 5e-5 · sum_k |w_k x_k| (+1e-30), the AMX split-bf16 bound
// (matmul_amx.h: at most 2·2^-16 ≈ 3.1e-5 for F16/BF16 weights, whose split is exact, 3·2^-16
// for F32, plus f32 accumulation); dropping any of the three products (~4e-3) or a misplaced
// tile row fails it. Shapes: rows 1..130 (partial 32-row blocks and 16-row tiles), K 1..1300
// (masked K tails, several prefetch distances, K shorter than one step), tokens 1..16,
// strided rows, 1-3 threads, 1-4 matrices in one call.
#include "kernels/matmul_amx_stream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "tensor/fp16.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {
namespace {

using testing::RandomActivations;
using testing::RandomMatrix;

constexpr double kTol = 5e-5;

void ExpectNearRef(const MatrixView& w, const float* x, int64_t tokens, const float* got) {
  std::vector<float> ref(tokens * w.rows);
  MatMulRef(w, x, tokens, ref.data());
  std::vector<float> wf(w.rows * w.cols);
  for (int64_t r = 0; r < w.rows; ++r) DequantizeRowRef(w.type, w.row(r), &wf[r * w.cols], w.cols);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double mag = 0;
      for (int64_t k = 0; k < w.cols; ++k)
        mag += std::fabs(double(wf[r * w.cols + k]) * x[t * w.cols + k]);
      ASSERT_NEAR(got[t * w.rows + r], ref[t * w.rows + r], kTol * mag + 1e-30)
          << DTypeName(w.type) << " rows=" << w.rows << " cols=" << w.cols
          << " tokens=" << tokens << " t=" << t << " r=" << r;
    }
  }
}

TEST(MatMulAmxStreamTest, MatchesReference) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const testing::AmxSwitch amx(true);
  std::mt19937 rng(11);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int i = 0;
  for (DType type : {DType::kF16, DType::kBF16, DType::kF32}) {
    for (int64_t cols : {1, 31, 32, 33, 384, 700, 1300}) {
      for (int64_t rows : {1, 15, 16, 17, 32, 45, 130}) {
        for (int64_t tokens : {1, 2, 7, 11, 16}) {
          const int64_t stride = RowBytes(type, cols) + (i % 3 == 0 ? 64 : 0);
          const auto m = RandomMatrix(type, rows, cols, stride, rng);
          const auto x = RandomActivations(tokens * cols, rng);
          const MatrixView w{type, m.data(), rows, cols, stride};
          std::vector<float> got(tokens * rows, NAN);
          MatMulAmxStream(w, x.data(), tokens, got.data(), pools[i % 3]);
          ExpectNearRef(w, x.data(), tokens, got.data());
          ++i;
        }
      }
    }
  }
}

// Several matrices of one width in one call (a layer's Q/K/V): each equals its own call.
TEST(MatMulAmxStreamTest, SharedEqualsOneByOne) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const testing::AmxSwitch amx(true);
  std::mt19937 rng(12);
  ThreadPool pool2(2);
  for (int n = 1; n <= kAmxStreamMaxShared; ++n) {
    const int64_t cols = 416, tokens = 9;
    std::vector<std::vector<uint8_t>> ms;
    std::vector<MatrixView> ws;
    for (int i = 0; i < n; ++i) {
      const int64_t rows = 40 + 33 * i;
      ms.push_back(RandomMatrix(DType::kF16, rows, cols, RowBytes(DType::kF16, cols), rng));
      ws.push_back(MatrixView::Dense(DType::kF16, ms.back().data(), rows, cols));
    }
    const auto x = RandomActivations(tokens * cols, rng);
    std::vector<std::vector<float>> ys(n), one(n);
    std::vector<const MatrixView*> wp;
    std::vector<float*> yp;
    for (int i = 0; i < n; ++i) {
      ys[i].assign(tokens * ws[i].rows, NAN);
      one[i].assign(tokens * ws[i].rows, NAN);
      wp.push_back(&ws[i]);
      yp.push_back(ys[i].data());
    }
    MatMulAmxStreamShared(wp.data(), yp.data(), n, x.data(), tokens, &pool2);
    for (int i = 0; i < n; ++i) {
      MatMulAmxStream(ws[i], x.data(), tokens, one[i].data(), nullptr);
      EXPECT_EQ(0, std::memcmp(ys[i].data(), one[i].data(), ys[i].size() * sizeof(float)))
          << "n=" << n << " matrix " << i;
      ExpectNearRef(ws[i], x.data(), tokens, ys[i].data());
    }
  }
}

// Every finite f16 value survives the split exactly: with x the identity (16 tokens, K = 16),
// y[t][r] is weight (r, t) itself (hi + lo, no rounding anywhere).
TEST(MatMulAmxStreamTest, F16IsExactForEveryValue) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const testing::AmxSwitch amx(true);
  std::vector<uint16_t> vals;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) != 0x7C00) vals.push_back(static_cast<uint16_t>(h));  // finite only
  }
  const int64_t K = 16, rows = static_cast<int64_t>(vals.size()) / K;
  const MatrixView w = MatrixView::Dense(DType::kF16, vals.data(), rows, K);
  std::vector<float> x(16 * K, 0.0f);
  for (int64_t t = 0; t < 16; ++t) x[t * K + t] = 1.0f;
  std::vector<float> y(16 * rows, NAN);
  ThreadPool pool2(2);
  MatMulAmxStream(w, x.data(), 16, y.data(), &pool2);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < 16; ++t) {
      const float want = F16ToF32(vals[r * K + t]);
      ASSERT_EQ(want, y[t * rows + r]) << "f16 0x" << std::hex << vals[r * K + t];
    }
  }
}

}  // namespace
}  // namespace tarmac::kernels
