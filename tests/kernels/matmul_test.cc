// MatMul (packed panels + register-blocked micro-kernel, threaded) vs the double-precision
// reference.
//
// Tolerance: |got - ref| <= 1e-4 · sum_k |w_k x_k| (+1e-30). Weights are dequantized exactly;
// the only error is f32 accumulation along k in one chain per output (K ≤ 4352 here): the
// classic bound K·2^-24 ≈ 2.6e-4 is never approached by random data (the observed error is
// ~sqrt(K)·2^-24 ≈ 4e-6), and any misplaced element or tile edge bug is far above 1e-4.
// The bound follows the kernel the dispatch table picks. MatVec (n_tokens == 1) is checked with
// its bound (testing::MatVecTolerance); MatVecMulti (2..16 tokens) and the f32 panels with the
// 1e-4 bound (exact weights, f32 sums). The int8-activation kernels (MatVecInt8 for Q8_0 / Q4_0
// on VNNI machines, MatVecQ6K for 1..16 Q6_K tokens from AVX2, MatMulInt8 for Q8_0 / Q4_0 /
// Q4_K with n_tokens >= 2) are checked with MatMulInt8's bound,
// 1.001 · sum_b (max_b|x| / 254) · sum_{k in b} |w_k| + 1e-4 · sum_k |w_k x_k| (matmul_int8.h;
// matmul_int8_test.cc checks it bit for bit against its own reference).
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dispatch.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_int8.h"
#include "kernels/matvec.h"
#include "kernels/matvec_int8.h"
#include "kernels/matvec_multi.h"
#include "kernels/panel_packed_matrix.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {
namespace {

using testing::kMatVecTypes;
using testing::RandomActivations;
using testing::RandomMatrix;

constexpr double kRelTol = 1e-4;

void CheckCase(DType type, int64_t rows, int64_t cols, int64_t tokens, int64_t stride,
               std::mt19937& rng, ThreadPool* pool, double rel_tol = kRelTol) {
  const auto m = RandomMatrix(type, rows, cols, stride, rng);
  const auto x = RandomActivations(tokens * cols, rng);
  const MatrixView w{type, m.data(), rows, cols, stride};
  std::vector<float> ref(tokens * rows), got(tokens * rows, NAN);
  MatMulRef(w, x.data(), tokens, ref.data());
  MatMul(w, x.data(), tokens, got.data(), pool);
  std::vector<float> wf(rows * cols);
  for (int64_t r = 0; r < rows; ++r) DequantizeRowRef(type, w.row(r), &wf[r * cols], cols);
  // The bound follows the kernel the dispatch table runs (dispatch.h).
  const MatMulKernel kernel = ChooseMatMulKernel({type, tokens, w.prepared_layout()});
  const bool int8_acts = kernel == MatMulKernel::kMatVecInt8 || kernel == MatMulKernel::kMatVecQ6K ||
                         kernel == MatMulKernel::kMatMulInt8 || kernel == MatMulKernel::kInterleavedInt8 ||
                         kernel == MatMulKernel::kMatMulQ6K || kernel == MatMulKernel::kMatVecBlocks;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double tol;
      if (kernel == MatMulKernel::kMatVec) {  // its own (activation-quantization) bound
        tol = testing::MatVecTolerance(type, &wf[r * cols], &x[t * cols], cols);
      } else if (int8_acts) {
        double mag = 0, quant = 0;
        for (int64_t b = 0; b < cols / 32; ++b) {
          double amax = 0, wsum = 0;
          for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
            amax = std::max(amax, double(std::fabs(x[t * cols + k])));
            wsum += std::fabs(wf[r * cols + k]);
            mag += std::fabs(double(wf[r * cols + k]) * x[t * cols + k]);
          }
          quant += amax / 254.0 * wsum;
        }
        tol = 1.001 * quant + kRelTol * mag + 1e-30;
      } else {
        double mag = 0;
        for (int64_t k = 0; k < cols; ++k) mag += std::fabs(double(wf[r * cols + k]) * x[t * cols + k]);
        tol = rel_tol * mag + 1e-30;
      }
      ASSERT_NEAR(got[t * rows + r], ref[t * rows + r], tol)
          << DTypeName(type) << " rows=" << rows << " cols=" << cols << " tokens=" << tokens
          << " t=" << t << " r=" << r << " threads=" << (pool ? pool->num_threads() : 1);
    }
  }
}

using testing::AmxSwitch;

// The Highway paths (packed f32 panels), also on machines with AMX.
TEST(MatMulTest, AllTypesShapesTokens) {
  const AmxSwitch no_amx(false);
  std::mt19937 rng(3);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  testing::ForEachTarget([&](const char* target) {
  SCOPED_TRACE(target);
  int i = 0;
  for (DType type : kMatVecTypes) {
    const int64_t bs = Traits(type).block_size;
    // Odd block counts, and K crossing the 512-wide K blocks of the packing.
    const std::vector<int64_t> cols_list =
        bs == 1 ? std::vector<int64_t>{1, 7, 255, 300, 513}
                : std::vector<int64_t>{bs, 3 * bs, (bs == 32 ? 17 : 5) * bs};
    for (int64_t cols : cols_list) {
      for (int64_t rows : {1, 3, 7, 17, 64, 130}) {
        for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33, 64}) {
          if (rows * cols * tokens > 1'000'000) continue;
          const int64_t stride = RowBytes(type, cols) + (i % 3 == 0 ? 24 : 0);
          CheckCase(type, rows, cols, tokens, stride, rng, pools[i % 3]);
          ++i;
        }
      }
    }
  }
  });
}

// The types computed from their decoded rows, through every kernel the dispatch picks for them
// (matvec, matvec-multi, the panels GEMM), a few shapes each.
TEST(MatMulTest, DequantizedTypes) {
  const AmxSwitch no_amx(false);
  std::mt19937 rng(8);
  ThreadPool pool2(2);
  for (DType type : testing::kDequantizedTypes) {
    const int64_t cols = 3 * Traits(type).block_size;
    for (int64_t tokens : {1, 4, 17, 40}) {
      CheckCase(type, 19, cols, tokens, RowBytes(type, cols) + 24, rng, &pool2);
    }
  }
}

TEST(MatMulTest, LongRows) {
  std::mt19937 rng(4);
  ThreadPool pool2(2);
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    for (DType type : kMatVecTypes) {
      const int64_t cols = 4096 + Traits(type).block_size;
      CheckCase(type, 70, cols, 9, RowBytes(type, cols), rng, &pool2);
    }
  });
}

// The AMX split-bf16 path (17+ tokens of non-int8 dtypes without pre-split weights): odd row
// counts (partial A tiles), K not a multiple of 32 (masked tails), K chunks (512 tokens × K
// 1280: 8-step chunks), token counts that leave partial B tiles, strided rows. Its worst-case error is 3·2^-16 ≈ 4.6e-5 of
// sum|w x| (matmul_amx.h), so the bound here is 5e-5: dropping a pass (~4e-3) fails it.
TEST(MatMulTest, AmxMatchesReference) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const AmxSwitch amx(true);
  std::mt19937 rng(5);
  ThreadPool pool2(2);
  int i = 0;
  for (DType type : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ6_K}) {
    const std::vector<int64_t> cols_list = type == DType::kQ6_K
                                               ? std::vector<int64_t>{256, 1280}
                                               : std::vector<int64_t>{8, 48, 300, 1280};
    for (int64_t cols : cols_list) {
      for (int64_t rows : {1, 17, 33, 70}) {
        for (int64_t tokens : {13, 16, 17, 31, 33, 64, 512}) {
          if (rows * cols * tokens > 12'000'000) continue;
          const int64_t stride = RowBytes(type, cols) + (i % 2 == 0 ? 64 : 0);
          CheckCase(type, rows, cols, tokens, stride, rng, i % 2 ? &pool2 : nullptr, 5e-5);
          ++i;
        }
      }
    }
  }
  EXPECT_GT(i, 40);
}

// Weights split ahead of time (AmxPackedMatrix: transposed tiles, activations as tile A, C
// stored straight into y) against the reference with the AMX bound, across K chunks, full and
// partial tiles (rows 16/45/96; tokens 7-20, 33 and 300 end in a lone token tile, 64 in
// pairs; MatMul sends 7+ tokens here),
// and every pre-split dtype.
TEST(MatMulTest, AmxPackedMatchesReference) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const AmxSwitch amx(true);
  std::mt19937 rng(6);
  ThreadPool pool2(2);
  for (DType type : {DType::kF16, DType::kBF16, DType::kF32, DType::kQ6_K}) {
    for (int64_t cols : {256, 1280}) {
      for (int64_t rows : {16, 45, 96}) {
        for (int64_t tokens : {7, 9, 16, 20, 33, 64, 300}) {
          const auto m = RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
          const auto x = RandomActivations(tokens * cols, rng);
          MatrixView w{type, m.data(), rows, cols, RowBytes(type, cols)};
          const auto p = AmxPackedMatrix::Pack(w, &pool2);
          ASSERT_TRUE(p->Matches(w));
          // hi 2 bytes per weight, lo 2 (f32, quantized), 0.5 (f16 nibbles) or 0 (bf16).
          const int64_t lo_bytes =
              type == DType::kBF16 ? 0 : (type == DType::kF16 ? 512 : 2048);
          EXPECT_EQ(AmxPackedMatrix::PackedBytes(w),
                    ((rows + 31) / 32) * ((cols + 31) / 32) * (2048 + lo_bytes));
          w.prepared = p.get();
          std::vector<float> ref(tokens * rows), got(tokens * rows, NAN);
          MatMulRef(w, x.data(), tokens, ref.data());
          MatMul(w, x.data(), tokens, got.data(), &pool2);
          std::vector<float> wf(rows * cols);
          for (int64_t r = 0; r < rows; ++r)
            DequantizeRowRef(type, w.row(r), &wf[r * cols], cols);
          for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              double mag = 0;
              for (int64_t k = 0; k < cols; ++k)
                mag += std::fabs(double(wf[r * cols + k]) * x[t * cols + k]);
              ASSERT_NEAR(got[t * rows + r], ref[t * rows + r], 5e-5 * mag + 1e-30)
                  << DTypeName(type) << " rows=" << rows << " cols=" << cols
                  << " tokens=" << tokens << " t=" << t << " r=" << r;
            }
          }
        }
      }
    }
  }
}

// Every finite f16 value survives the pre-split copy exactly: hi (truncated bf16) plus lo
// rebuilt from its nibble. x is the identity, so y[t][r] = hi + lo of weight (r, t), with no
// rounding anywhere (X_lo = 0, and hi + lo is exact in f32).
TEST(MatMulTest, AmxPackedF16IsExactForEveryValue) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const AmxSwitch amx(true);
  const int64_t rows = 64, cols = 1024;  // 65536 weights: every f16 bit pattern
  std::vector<uint16_t> m(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const auto bits = static_cast<uint16_t>(i);
    m[i] = (bits & 0x7C00) == 0x7C00 ? 0 : bits;  // inf and NaN -> 0
  }
  MatrixView w{DType::kF16, m.data(), rows, cols, cols * 2};
  const auto p = AmxPackedMatrix::Pack(w, nullptr);
  ASSERT_EQ(p->lo_kind(), AmxPackedMatrix::Lo::kNibble);
  w.prepared = p.get();
  std::vector<float> x(cols * cols, 0.0f), y(cols * rows, NAN);
  for (int64_t t = 0; t < cols; ++t) x[t * cols + t] = 1.0f;
  ThreadPool pool2(2);
  MatMul(w, x.data(), cols, y.data(), &pool2);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < cols; ++t)
      ASSERT_EQ(y[t * rows + r], F16ToF32(m[r * cols + t])) << "f16 bits " << m[r * cols + t];
}

// Dense random matrices of one width: the operands of the shared products (several matrices,
// one x). views may be changed afterwards (a prepared copy); ptrs point at them.
struct MatrixSet {
  MatrixSet(const std::vector<DType>& types, const std::vector<int64_t>& rows, int64_t cols,
            std::mt19937& rng) {
    for (size_t i = 0; i < types.size(); ++i) {
      const int64_t stride = RowBytes(types[i], cols);
      bytes.push_back(RandomMatrix(types[i], rows[i], cols, stride, rng));
      views.push_back(MatrixView{types[i], bytes.back().data(), rows[i], cols, stride});
    }
    for (const MatrixView& v : views) ptrs.push_back(&v);
  }
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<MatrixView> views;
  std::vector<const MatrixView*> ptrs;
};

// NaN-filled outputs of a set's first n matrices for `tokens` tokens; ptrs for shared calls.
struct Outputs {
  Outputs(const MatrixSet& set, int n, int64_t tokens) {
    for (int i = 0; i < n; ++i) y.emplace_back(tokens * set.views[i].rows, NAN);
    for (auto& v : y) ptrs.push_back(v.data());
  }
  std::vector<std::vector<float>> y;
  std::vector<float*> ptrs;
};

// Per matrix, the same bits.
::testing::AssertionResult SameBits(const Outputs& a, const Outputs& b) {
  for (size_t i = 0; i < a.y.size(); ++i) {
    if (std::memcmp(a.y[i].data(), b.y[i].data(), a.y[i].size() * sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "matrix " << i << " differs";
  }
  return ::testing::AssertionSuccess();
}

// Several pre-split matrices with one x in one call (Q/K/V, gate/up): bit-identical to one
// MatMul per matrix, on partial row blocks, a K tail and lone / paired token tiles, with mixed
// dtypes (BF16 skips its lo pass).
TEST(MatMulTest, AmxSharedEqualsOneByOne) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const AmxSwitch amx(true);
  std::mt19937 rng(8);
  ThreadPool pool2(2);
  const int64_t cols = 300;
  // Nibble-coded lo (F16) next to none (BF16) and stored (F32): a row block rebuilds the next
  // block's first step only when that block is F16.
  MatrixSet set({DType::kF16, DType::kBF16, DType::kF32, DType::kF16}, {45, 16, 100, 40}, cols, rng);
  std::vector<std::unique_ptr<AmxPackedMatrix>> pks;
  for (MatrixView& w : set.views) {
    pks.push_back(AmxPackedMatrix::Pack(w, &pool2));
    w.prepared = pks.back().get();
  }
  const MatrixView* const* wp = set.ptrs.data();
  ASSERT_TRUE(CanShareMatMulAmx(wp, 4));
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
    for (int64_t tokens : {7, 33, 64, 300}) {
      const auto x = RandomActivations(tokens * cols, rng);
      Outputs shared(set, 4, tokens), single(set, 4, tokens);
      for (int i = 0; i < 4; ++i) MatMulAmx(set.views[i], x.data(), tokens, single.ptrs[i], pool);
      MatMulAmxShared(wp, shared.ptrs.data(), 4, x.data(), tokens, pool);
      ASSERT_TRUE(SameBits(shared, single)) << "tokens=" << tokens;
    }
  }
  // Not shareable: no pre-split copy, another width, or AMX off.
  set.views[1].prepared = nullptr;
  EXPECT_FALSE(CanShareMatMulAmx(wp, 3));
  set.views[1].prepared = pks[1].get();
  set.views[2].cols = 256;
  EXPECT_FALSE(CanShareMatMulAmx(wp, 3));
  set.views[2].cols = cols;
  const AmxSwitch off(false);
  EXPECT_FALSE(CanShareMatMulAmx(wp, 3));
}

// Several matrices with one x in one parallel region on f32 panels (Q/K/V, gate/up where the
// weights are f16/f32 without AMX): bit-identical to MatMulPanels per matrix, at every level,
// with and without the panel copy, rows that end mid-panel and mid-block, token tails, and
// 1-3 threads. MatMulShared (whichever form it takes) equals MatMul per matrix.
TEST(MatMulTest, PanelsSharedEqualsOneByOne) {
  std::mt19937 rng(9);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int k = 0;
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    const int64_t cols = 300;
    MatrixSet set({DType::kF16, DType::kF32, DType::kF16, DType::kF16}, {45, 16, 100, 1}, cols, rng);
    // The first f16 matrix reads a panel copy of this level's width.
    const auto pk = PanelPackedMatrix::Pack(set.views[0], MatMulPanelWidth(), nullptr);
    set.views[0].prepared = pk.get();
    for (int n : {1, 2, 3, 4}) {
      for (int64_t tokens : {1, 2, 7, 17, 33, 64}) {
        ThreadPool* pool = pools[k++ % 3];
        const auto x = RandomActivations(tokens * cols, rng);
        Outputs shared(set, n, tokens), single(set, n, tokens), dispatched(set, n, tokens),
            mm(set, n, tokens);
        for (int m = 0; m < n; ++m) {
          MatMulPanels(set.views[m], x.data(), tokens, single.ptrs[m], pool);
          MatMul(set.views[m], x.data(), tokens, mm.ptrs[m], pool);
        }
        MatMulPanelsShared(set.ptrs.data(), shared.ptrs.data(), n, x.data(), tokens, pool);
        MatMulShared(set.ptrs.data(), dispatched.ptrs.data(), n, x.data(), tokens, pool);
        ASSERT_TRUE(SameBits(shared, single)) << "n=" << n << " tokens=" << tokens;
        ASSERT_TRUE(SameBits(dispatched, mm)) << "n=" << n << " tokens=" << tokens;
      }
    }
  });
}

// The f32-panel GEMM computes each output as one FMA chain in k order whatever tile its token
// lands in (6-token tiles, short tiles on two or four panels, a partial panel, the in-place f16
// tiles or the f32 scratch past 8 tiles): a token's row is bit-identical to that token alone.
// And MatMul on f16 with a panel copy (which the dispatch table sends to the panels at every
// token count) is too, so a sequence's logits do not depend on its batch. Fails if a short
// tile reads or writes the wrong panel, or sums in another order, or if the dispatch sends a
// few tokens of such a matrix to a kernel that sums in another order.
TEST(MatMulTest, PanelsResultsDoNotDependOnTheBatch) {
  std::mt19937 rng(11);
  ThreadPool pool2(2);
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    for (DType type : {DType::kF16, DType::kF32}) {
      for (int64_t rows : {16, 40, 67, 128, 520, 1024}) {
        for (int64_t cols : {300, 1100}) {
          const auto bytes = RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
          MatrixView w{type, bytes.data(), rows, cols, RowBytes(type, cols)};
          std::unique_ptr<PanelPackedMatrix> pk;
          if (type == DType::kF16 && WantsPanelCopy(type)) {
            pk = PanelPackedMatrix::Pack(w, MatMulPanelWidth(), nullptr);
            w.prepared = pk.get();
          }
          for (int64_t tokens : {2, 3, 4, 7, 8, 9, 14, 51}) {
            const auto x = RandomActivations(tokens * cols, rng);
            std::vector<float> all(tokens * rows, NAN), one(rows, NAN), mm(tokens * rows, NAN);
            MatMulPanels(w, x.data(), tokens, all.data(), &pool2);
            if (pk != nullptr) MatMul(w, x.data(), tokens, mm.data(), &pool2);
            for (int64_t t = 0; t < tokens; ++t) {
              MatMulPanels(w, x.data() + t * cols, 1, one.data(), nullptr);
              ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * rows, rows * 4))
                  << DTypeName(type) << " rows " << rows << " cols " << cols << " tokens "
                  << tokens << " token " << t;
              if (pk == nullptr) continue;
              ASSERT_EQ(0, std::memcmp(one.data(), mm.data() + t * rows, rows * 4))
                  << "MatMul, rows " << rows << " cols " << cols << " tokens " << tokens
                  << " token " << t;
              MatMul(w, x.data() + t * cols, 1, one.data(), &pool2);
              ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * rows, rows * 4))
                  << "MatMul of one token, rows " << rows << " cols " << cols;
            }
          }
        }
      }
    }
  });
}

// The few-token form: 1..4 matrices (mixed dtypes allowed) in one region, per matrix
// bit-identical to MatVecMulti; and MatMulShared over matrices of one dtype at 1, a few and
// many tokens (MatVecShared, MatVecMultiShared or a GEMM form) equal to MatMul per matrix.
TEST(MatMulTest, MatVecSharedFormsEqualOneByOne) {
  std::mt19937 rng(13);
  ThreadPool pool2(2);
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    const int64_t cols = 256;
    for (bool mixed : {true, false}) {
      MatrixSet set({DType::kF16, mixed ? DType::kF32 : DType::kF16, mixed ? DType::kQ6_K : DType::kF16},
                    {100, 64, 129}, cols, rng);
      for (int64_t tokens : {1, 2, 5, 16, 17, 40}) {
        const auto x = RandomActivations(tokens * cols, rng);
        Outputs multi(set, 3, tokens), multi1(set, 3, tokens), got(set, 3, tokens),
            want(set, 3, tokens);
        const bool few = tokens <= kMatVecMultiMaxTokens;
        for (int m = 0; m < 3; ++m) {
          MatMul(set.views[m], x.data(), tokens, want.ptrs[m], &pool2);
          if (few) MatVecMulti(set.views[m], x.data(), tokens, multi1.ptrs[m], &pool2);
        }
        if (few) MatVecMultiShared(set.ptrs.data(), multi.ptrs.data(), 3, x.data(), tokens, &pool2);
        MatMulShared(set.ptrs.data(), got.ptrs.data(), 3, x.data(), tokens, &pool2);
        if (few) {
          ASSERT_TRUE(SameBits(multi, multi1)) << "mixed " << mixed << " tokens " << tokens;
        }
        ASSERT_TRUE(SameBits(got, want)) << "mixed " << mixed << " tokens " << tokens;
      }
    }
  });
}

// MatMulShared with matrices whose kernels differ (an interleaved-int8 Q8_0 beside an f16) or
// that have no fused form (Q6_K, a few tokens): per matrix equal to MatMul.
TEST(MatMulTest, SharedFallsBackToOneByOne) {
  std::mt19937 rng(10);
  ThreadPool pool2(2);
  const int64_t cols = 256;
  MatrixSet set({DType::kQ8_0, DType::kF16, DType::kQ6_K}, {40, 24, 16}, cols, rng);
  for (int64_t tokens : {1, 3, 20}) {
    const auto x = RandomActivations(tokens * cols, rng);
    Outputs got(set, 3, tokens), want(set, 3, tokens);
    for (int m = 0; m < 3; ++m) MatMul(set.views[m], x.data(), tokens, want.ptrs[m], &pool2);
    MatMulShared(set.ptrs.data(), got.ptrs.data(), 3, x.data(), tokens, &pool2);
    ASSERT_TRUE(SameBits(got, want)) << "tokens=" << tokens;
  }
}

TEST(MatMulTest, ZeroTokens) {
  float y = 5.0f;
  MatMul(MatrixView{DType::kF16, nullptr, 1, 16, 32}, nullptr, 0, &y, nullptr);
  EXPECT_EQ(y, 5.0f);
}

}  // namespace
}  // namespace tarmac::kernels
