// MatMulInt8 (int8 activations × Q8_0/Q4_0/Q4_K weights, integer dot products) against
//  (1) MatMulInt8Ref, the scalar reference that quantizes activations the same way and
//      accumulates in the same order: results must be BIT-IDENTICAL, on every code path
//      (AVX-512 VNNI, AVX2, scalar; forced through the Highway target mask), thread count,
//      token count (1..40, across the 6-token / 2-token tiles), row count (across the 16/32-row
//      tiles) and K (across the 512-element K chunks);
//  (2) MatMulRef (exact weights, f32 activations, double accumulation) with the stated bound:
//        |y - y_exact| <= 1.001 · sum_b (max_b|x| / 254) · sum_{k in b} |w_k|
//                         + 2e-5 · sum_k |w_k x_k| + 1e-30
//      (half a quantization step of each block's activations, plus f32 accumulation over at
//      most 4096/32 blocks). The test also prints the largest observed error relative to
//      sum_k |w_k x_k|.
#include "kernels/matmul_int8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_int8_amx.h"
#include "kernels/quant_interleaved.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {
namespace {

// Every int8 path this machine has: each ISA level (amx-int8, avx512vnni, avx2-vnni where the
// CPU has AVX-VNNI, avx2, scalar).
template <typename Fn>
void ForEachInt8Path(const Fn& fn) {
  testing::ForEachIsa(fn);
}

using testing::RandomActivations;
using testing::RandomMatrix;

double Int8Tolerance(const float* w, const float* x, int64_t n, double* abs_dot_out) {
  double abs_dot = 0, quant = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    double amax = 0, wsum = 0;
    for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
      amax = std::max(amax, static_cast<double>(std::fabs(x[k])));
      wsum += std::fabs(w[k]);
      abs_dot += std::fabs(static_cast<double>(w[k]) * x[k]);
    }
    quant += amax / 254.0 * wsum;
  }
  *abs_dot_out = abs_dot;
  return 1.001 * quant + 2e-5 * abs_dot + 1e-30;
}

struct Stats {
  double max_rel = 0;  // max |err| / sum |w x|
};

// Checks one case: bit-identical to MatMulInt8Ref and within the bound of MatMulRef.
void CheckCase(DType type, int64_t rows, int64_t cols, int64_t tokens, int64_t stride,
               std::mt19937& rng, ThreadPool* pool, bool check_exact, Stats* st,
               bool gaussian = false) {
  const auto m = RandomMatrix(type, rows, cols, stride, rng);
  std::vector<float> x;
  if (gaussian) {  // one magnitude: the typical case (RandomActivations mixes 4 decades)
    std::normal_distribution<float> nd(0.0f, 1.0f);
    x.resize(tokens * cols);
    for (auto& v : x) v = nd(rng);
  } else {
    x = RandomActivations(tokens * cols, rng);
  }
  const MatrixView w{type, m.data(), rows, cols, stride};
  std::vector<float> ref(tokens * rows), got(tokens * rows, NAN);
  MatMulInt8Ref(w, x.data(), tokens, ref.data());
  MatMulInt8(w, x.data(), tokens, got.data(), pool);
  for (int64_t i = 0; i < tokens * rows; ++i) {
    ASSERT_EQ(got[i], ref[i]) << DTypeName(type) << " rows=" << rows << " cols=" << cols
                              << " tokens=" << tokens << " t=" << i / rows << " r=" << i % rows
                              << " threads=" << (pool ? pool->num_threads() : 1)
                              << " path=" << Int8MatMulPath();
  }
  if (!check_exact) return;
  std::vector<float> exact(tokens * rows), wf(rows * cols);
  MatMulRef(w, x.data(), tokens, exact.data());
  for (int64_t r = 0; r < rows; ++r) DequantizeRowRef(type, w.row(r), &wf[r * cols], cols);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double abs_dot;
      const double tol = Int8Tolerance(&wf[r * cols], &x[t * cols], cols, &abs_dot);
      const double err = std::fabs(double(got[t * rows + r]) - exact[t * rows + r]);
      if (abs_dot > 0) st->max_rel = std::max(st->max_rel, err / abs_dot);
      ASSERT_LE(err, tol) << DTypeName(type) << " rows=" << rows << " cols=" << cols
                          << " tokens=" << tokens << " t=" << t << " r=" << r;
    }
  }
}

const DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K};

TEST(MatMulInt8Test, BitIdenticalToReferenceAllPaths) {
  std::mt19937 rng(11);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  ForEachInt8Path([&](const char* target) {
    SCOPED_TRACE(target);
    SCOPED_TRACE(Int8MatMulPath());
    int i = 0;
    for (DType type : kTypes) {
      const bool k = type == DType::kQ4_K;  // rows of 256-element super-blocks
      const std::vector<int64_t> cols_list = k ? std::vector<int64_t>{256, 512, 768, 1280}
                                               : std::vector<int64_t>{32, 96, 512, 544, 1056};
      for (int64_t cols : cols_list) {
        for (int64_t rows : {1, 5, 16, 17, 31, 32, 33, 64, 100, 129}) {
          for (int64_t tokens : {2, 3, 5, 6, 7, 12, 13, 40}) {
            if (rows * cols * tokens > 2'000'000) continue;
            const int64_t stride = RowBytes(type, cols) + (i % 3 == 0 ? 6 : 0);
            Stats st;
            CheckCase(type, rows, cols, tokens, stride, rng, pools[i % 3], /*check_exact=*/false,
                      &st);
            if (::testing::Test::HasFatalFailure()) return;
            ++i;
          }
        }
      }
    }
  });
}

// With a QuantInterleaved copy (MatrixView::prepared) the slabs come from the copy and w.data is never
// read (null here): still bit-identical to the reference on the GGUF bytes, on every path.
TEST(MatMulInt8Test, FromInterleavedCopyWithoutGgufBytes) {
  std::mt19937 rng(13);
  ThreadPool pool2(2);
  ForEachInt8Path([&](const char* target) {
    SCOPED_TRACE(target);
    for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K}) {
      for (int64_t c : {32, 544, 1056}) {
        const int64_t cols = type == DType::kQ4_K ? (c + 255) / 256 * 256 : c;
        for (int64_t rows : {1, 16, 17, 33, 100}) {
          for (int64_t tokens : {1, 2, 7, 13, 20}) {
            const auto m = RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
            const MatrixView gguf{type, m.data(), rows, cols, RowBytes(type, cols)};
            const auto pk = QuantInterleaved::Pack(gguf);
            MatrixView w = gguf;
            w.data = nullptr;
            w.prepared = pk.get();
            const auto x = RandomActivations(tokens * cols, rng);
            std::vector<float> ref(tokens * rows), got(tokens * rows, NAN), via(tokens * rows);
            MatMulInt8Ref(gguf, x.data(), tokens, ref.data());
            MatMulInt8(w, x.data(), tokens, got.data(), &pool2);
            MatMul(w, x.data(), tokens, via.data(), &pool2);  // tokens == 1: MatVecInt8
            for (int64_t i = 0; i < tokens * rows; ++i) {
              ASSERT_EQ(got[i], ref[i]) << DTypeName(type) << " rows=" << rows << " cols=" << cols
                                        << " tokens=" << tokens << " i=" << i;
              ASSERT_EQ(via[i], ref[i]) << DTypeName(type) << " rows=" << rows << " cols=" << cols
                                        << " tokens=" << tokens << " i=" << i;
            }
          }
        }
      }
    }
  });
}

TEST(MatMulInt8Test, WithinStatedBoundOfExactProduct) {
  std::mt19937 rng(12);
  ThreadPool pool2(2);
  for (DType type : kTypes) {
    Stats st;
    for (int64_t cols : {256, 512, 2048, 4096}) {
      for (int64_t rows : {7, 48, 130}) {
        for (int64_t tokens : {1, 2, 9, 33}) {
          if (rows * cols * tokens > 4'000'000) continue;
          CheckCase(type, rows, cols, tokens, RowBytes(type, cols), rng, &pool2, true, &st);
          if (HasFatalFailure()) return;
        }
      }
    }
    std::printf("%s (%s): max |err| / sum|w x| = %.3g (activations spanning 4 decades)\n",
                std::string(DTypeName(type)).c_str(), Int8MatMulPath(), st.max_rel);
    Stats sg;
    for (int64_t cols : {256, 2048}) {
      CheckCase(type, 64, cols, 9, RowBytes(type, cols), rng, &pool2, true, &sg, /*gaussian=*/true);
      if (HasFatalFailure()) return;
    }
    std::printf("%s (%s): max |err| / sum|w x| = %.3g (gaussian activations)\n",
                std::string(DTypeName(type)).c_str(), Int8MatMulPath(), sg.max_rel);
  }
}

// The real shapes of a 1B model's projections (K up to 4k, rows up to 4k), few tokens.
TEST(MatMulInt8Test, LargeShapes) {
  std::mt19937 rng(13);
  ThreadPool pool2(2);
  for (DType type : kTypes) {
    Stats st;
    CheckCase(type, 4096, 1024, 3, RowBytes(type, 1024), rng, &pool2, false, &st);
    CheckCase(type, 300, 4096, 17, RowBytes(type, 4096), rng, &pool2, true, &st);
    if (HasFatalFailure()) return;
  }
}

// MatMul dispatches Q8_0/Q4_0/Q4_K with >= 2 tokens here (and 1 token to MatVec).
TEST(MatMulInt8Test, MatMulDispatches) {
  std::mt19937 rng(14);
  for (DType type : kTypes) {
    const auto m = RandomMatrix(type, 40, 256, RowBytes(type, 256), rng);
    const auto x = RandomActivations(5 * 256, rng);
    const MatrixView w{type, m.data(), 40, 256, RowBytes(type, 256)};
    std::vector<float> a(5 * 40), b(5 * 40);
    MatMul(w, x.data(), 5, a.data(), nullptr);
    MatMulInt8Ref(w, x.data(), 5, b.data());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << DTypeName(type);
  }
}

// ForEachInt8Path reaches every code path this CPU has (the sweeps above rely on it).
TEST(MatMulInt8Test, EveryPathIsTested) {
  std::set<std::string> paths;
  ForEachInt8Path([&](const char*) { paths.insert(Int8MatMulPath()); });
  EXPECT_TRUE(paths.count("scalar")) << "no target reached the scalar path";
#if defined(__x86_64__)
  if (CpuSupports(Isa::kAvx2)) {
    EXPECT_TRUE(paths.count("avx2"));
  }
  if (CpuSupports(Isa::kAvx2Vnni) && Cpu().avx_vnni) {
    EXPECT_TRUE(paths.count("avx2-vnni"));
  }
  if (CpuSupports(Isa::kAvx512)) {
    EXPECT_TRUE(paths.count("avx512vnni"));
  }
  if (CpuSupports(Isa::kAmx)) {
    EXPECT_TRUE(paths.count("amx-int8"));
  }
#endif
  std::string all;
  for (const auto& p : paths) all += p + " ";
  std::printf("int8 paths tested: %s\n", all.c_str());
}

// The integer extremes of each path's arithmetic: Q8_0 weights -128 and 127 (|w| = 128 is the
// largest vpmaddubsw operand of the AVX2 signed tile: pairs 2·128·127 = 32512) and Q4_0
// nibbles 0 and 15 (8 k-groups of 15·127 pairs summed in int16: 30480) against activations
// that quantize to ±127 with every sign pattern. Bit-identical to the reference on every path,
// and the reference within f32 rounding of the exact integer products (a wrapped or saturated
// int16 sum would be off by thousands).
TEST(MatMulInt8Test, IntegerExtremesDoNotSaturate) {
  constexpr int64_t kCols = 256, kRows = 32, kTokens = 7;
  ThreadPool pool2(2);
  // Weight value of row r, column k (Q8_0 range; Q4_0 uses -8 / 7 for the sign).
  auto wq = [](int64_t r, int64_t k) -> int {
    switch (r % 4) {
      case 0: return -128;
      case 1: return 127;
      case 2: return k % 2 == 0 ? -128 : 127;
      default: return (k / 3 + r) % 2 == 0 ? -128 : 127;
    }
  };
  // Activation sign of token t, column k.
  auto xs = [](int64_t t, int64_t k) -> float {
    switch (t % 4) {
      case 0: return 1.0f;
      case 1: return -1.0f;
      case 2: return k % 2 == 0 ? 1.0f : -1.0f;
      default: return (k / 3 + t) % 2 == 0 ? -1.0f : 1.0f;
    }
  };
  std::vector<float> x(kTokens * kCols);
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t k = 0; k < kCols; ++k) x[t * kCols + k] = xs(t, k);
  }
  for (DType type : {DType::kQ8_0, DType::kQ4_0}) {
    const int64_t rb = RowBytes(type, kCols);
    std::vector<uint8_t> m(kRows * rb);
    std::vector<double> exact(kTokens * kRows, 0.0);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t b = 0; b < kCols / 32; ++b) {
        if (type == DType::kQ8_0) {
          auto* blk = reinterpret_cast<BlockQ8_0*>(m.data() + r * rb) + b;
          blk->d = F32ToF16(1.0f);
          for (int k = 0; k < 32; ++k) blk->qs[k] = static_cast<int8_t>(wq(r, 32 * b + k));
        } else {
          auto* blk = reinterpret_cast<BlockQ4_0*>(m.data() + r * rb) + b;
          blk->d = F32ToF16(1.0f);
          for (int k = 0; k < 16; ++k) {
            const int lo = wq(r, 32 * b + k) < 0 ? 0 : 15, hi = wq(r, 32 * b + k + 16) < 0 ? 0 : 15;
            blk->qs[k] = static_cast<uint8_t>(lo | (hi << 4));
          }
        }
      }
      for (int64_t t = 0; t < kTokens; ++t) {
        for (int64_t k = 0; k < kCols; ++k) {
          const int w = type == DType::kQ8_0 ? wq(r, k) : (wq(r, k) < 0 ? -8 : 7);
          exact[t * kRows + r] += static_cast<double>(w) * xs(t, k);
        }
      }
    }
    const MatrixView w{type, m.data(), kRows, kCols, rb};
    std::vector<float> ref(kTokens * kRows);
    MatMulInt8Ref(w, x.data(), kTokens, ref.data());
    for (int64_t i = 0; i < kTokens * kRows; ++i) {
      // d = 1/127 is rounded to f32: the products within f32 rounding of sum |w x|.
      ASSERT_NEAR(ref[i], exact[i], 1e-5 * kCols * 128) << DTypeName(type) << " i=" << i;
    }
    ForEachInt8Path([&](const char* target) {
      SCOPED_TRACE(target);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        std::vector<float> got(kTokens * kRows, NAN);
        MatMulInt8(w, x.data(), kTokens, got.data(), pool);
        for (int64_t i = 0; i < kTokens * kRows; ++i) {
          ASSERT_EQ(got[i], ref[i]) << DTypeName(type) << " t=" << i / kRows << " r=" << i % kRows
                                    << " path=" << Int8MatMulPath();
        }
      }
    });
  }
}

TEST(MatMulInt8Test, ActivationQuantization) {
  std::mt19937 rng(15);
  const auto x = RandomActivations(32 * 200, rng);
  std::vector<int8_t> q(x.size());
  std::vector<float> d(x.size() / 32);
  QuantizeActivationsQ8Ref(x.data(), x.size(), q.data(), d.data());
  for (size_t b = 0; b < d.size(); ++b) {
    int qmax = 0;
    for (size_t k = 32 * b; k < 32 * b + 32; ++k) {
      qmax = std::max(qmax, std::abs(int{q[k]}));
      EXPECT_LE(std::fabs(x[k] - d[b] * q[k]), d[b] * (0.5 + 1e-4)) << k;
    }
    EXPECT_EQ(qmax, 127) << b;
  }
  // Zero and non-finite blocks.
  std::vector<float> z(64, 0.0f);
  z[40] = INFINITY;
  QuantizeActivationsQ8Ref(z.data(), 64, q.data(), d.data());
  EXPECT_EQ(d[0], 0.0f);
  EXPECT_TRUE(std::isnan(d[1]));
}

TEST(MatMulInt8Test, NonFiniteActivationsGiveNaN) {
  std::mt19937 rng(16);
  ForEachInt8Path([&](const char* target) {
    SCOPED_TRACE(target);
    const auto m = RandomMatrix(DType::kQ8_0, 20, 64, RowBytes(DType::kQ8_0, 64), rng);
    auto x = RandomActivations(3 * 64, rng);
    x[64 + 33] = NAN;  // token 1, block 1
    const MatrixView w{DType::kQ8_0, m.data(), 20, 64, RowBytes(DType::kQ8_0, 64)};
    std::vector<float> y(3 * 20);
    MatMulInt8(w, x.data(), 3, y.data(), nullptr);
    for (int r = 0; r < 20; ++r) {
      EXPECT_TRUE(std::isfinite(y[r]));
      EXPECT_TRUE(std::isnan(y[20 + r]));
      EXPECT_TRUE(std::isfinite(y[40 + r]));
    }
  });
}

}  // namespace
}  // namespace tarmac::kernels
