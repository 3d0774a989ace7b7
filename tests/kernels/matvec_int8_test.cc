// MatVecInt8 (batch-1 Q8_0/Q4_0 decode with int8 activations; Q4_K too with an interleaved
// copy) against MatMulInt8Ref, the scalar reference with the same activation quantization and
// the same per-block integers:
// only the f32 summation order differs, so with S = sum_k |w_k| · |d_b q_k| (the dequantized
// activations) the test checks
//   |y - ref| <= (K/8 + 8) · 2^-23 · S + 1e-30
// (both sides sum at most K/8 rounded f32 terms). Also: results independent of the thread
// count, the matrix's last byte at the end of readable memory (no over-read), non-finite and
// zero blocks, the fallback without VNNI (forced lower Highway target), and MatMul's dispatch.
// With a QuantInterleaved copy (MatrixView::prepared) the kernel sums in the reference's order: results
// must be bit-identical to MatMulInt8Ref, for one token and for the 2-16 token batches.
#include "kernels/matvec_int8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_int8.h"
#include "kernels/quant_interleaved.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels {
namespace {

using testing::GuardedCopy;
using testing::Int8ActivationMagnitude;
using testing::RandomActivations;
using testing::RandomMatrix;

const DType kTypes[] = {DType::kQ8_0, DType::kQ4_0};
// With an interleaved copy Q4_K decodes here too (its 32-element sub-blocks, with mins).
const DType kInterleavedTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K};

// A width of the list, rounded up to whole blocks of type (Q4_K: 256-element super-blocks).
int64_t Width(DType type, int64_t cols) {
  const int64_t bs = Traits(type).block_size;
  return (cols + bs - 1) / bs * bs;
}

// The bound above for row r.
double OrderTolerance(const MatrixView& w, int64_t r, const float* x) {
  return (w.cols / 8.0 + 8.0) * std::ldexp(1.0, -23) * Int8ActivationMagnitude(w, r, x) + 1e-30;
}

// Random matrices of one type and width, each with its QuantInterleaved copy set as prepared
// (the views point into the bytes and copies held here).
struct InterleavedSet {
  std::vector<std::vector<uint8_t>> mats;
  std::vector<MatrixView> ws;
  std::vector<std::unique_ptr<QuantInterleaved>> pks;
};
InterleavedSet MakeInterleaved(DType type, std::initializer_list<int64_t> rows, int64_t cols,
                               std::mt19937& rng) {
  InterleavedSet s;
  for (int64_t r : rows) {
    s.mats.push_back(RandomMatrix(type, r, cols, RowBytes(type, cols), rng));
    s.ws.push_back(MatrixView{type, s.mats.back().data(), r, cols, RowBytes(type, cols)});
  }
  for (MatrixView& w : s.ws) {
    s.pks.push_back(QuantInterleaved::Pack(w));
    w.prepared = s.pks.back().get();
  }
  return s;
}

void CheckCase(DType type, int64_t rows, int64_t cols, int64_t stride, std::mt19937& rng,
               ThreadPool* pool) {
  const auto m = RandomMatrix(type, rows, cols, stride, rng);
  const auto x = RandomActivations(cols, rng);
  const MatrixView w{type, m.data(), rows, cols, stride};
  std::vector<float> ref(rows), got(rows, NAN), one(rows, NAN);
  MatMulInt8Ref(w, x.data(), 1, ref.data());
  MatVecInt8(w, x.data(), got.data(), pool);
  MatVecInt8(w, x.data(), one.data(), nullptr);
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_LE(std::fabs(double(got[r]) - ref[r]), OrderTolerance(w, r, x.data()))
        << DTypeName(type) << " rows=" << rows << " cols=" << cols << " r=" << r
        << " got=" << got[r] << " ref=" << ref[r];
    ASSERT_EQ(got[r], one[r]) << "thread count changed the result: r=" << r;
  }
}

TEST(MatVecInt8Test, MatchesReferenceAcrossShapes) {
  if (!Int8MatVecFast()) GTEST_SKIP() << "no AVX-512 VNNI/VBMI: the fallback is tested below";
  std::mt19937 rng(21);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int i = 0;
  for (DType type : kTypes) {
    // Whole 4-block groups, 1-3 leftover blocks, and only leftovers.
    for (int64_t cols : {32, 64, 96, 128, 160, 224, 512, 544, 1056, 2048, 4128}) {
      for (int64_t rows : {1, 2, 3, 5, 17, 64, 129}) {
        const int64_t stride = RowBytes(type, cols) + (i % 3 == 1 ? 14 : i % 3 == 0 ? 24 : 0);
        CheckCase(type, rows, cols, stride, rng, pools[i % 3]);
        if (HasFatalFailure()) return;
        ++i;
      }
    }
  }
}

TEST(MatVecInt8Test, FallbackWithoutVnniComputesTheSameFunction) {
  std::mt19937 rng(22);
  ThreadPool pool2(2);
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    for (DType type : kTypes) {
      for (int64_t cols : {64, 160, 1056}) {
        CheckCase(type, 37, cols, RowBytes(type, cols), rng, &pool2);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

// The matrix ends exactly where readable memory ends: any read past the last row faults.
TEST(MatVecInt8Test, ReadsNothingPastTheMatrix) {
  std::mt19937 rng(23);
  for (DType type : kTypes) {
    for (int64_t cols : {128, 256, 160}) {
      const int64_t rows = 9, bytes = rows * RowBytes(type, cols);
      const GuardedCopy data(RandomMatrix(type, rows, cols, RowBytes(type, cols), rng), bytes);
      ASSERT_NE(data.data(), nullptr);
      const MatrixView w{type, data.data(), rows, cols, RowBytes(type, cols)};
      const auto x = RandomActivations(cols, rng);
      std::vector<float> ref(rows), got(rows);
      MatMulInt8Ref(w, x.data(), 1, ref.data());
      MatVecInt8(w, x.data(), got.data(), nullptr);
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_LE(std::fabs(double(got[r]) - ref[r]), OrderTolerance(w, r, x.data()));
    }
  }
}

TEST(MatVecInt8Test, NonFiniteAndZeroBlocks) {
  std::mt19937 rng(24);
  for (DType type : kTypes) {
    const int64_t rows = 6, cols = 256;
    const auto m = RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
    const MatrixView w{type, m.data(), rows, cols, RowBytes(type, cols)};
    std::vector<float> x(cols, 0.0f), y(rows, NAN);
    MatVecInt8(w, x.data(), y.data(), nullptr);
    for (float v : y) EXPECT_EQ(v, 0.0f);
    x = RandomActivations(cols, rng);
    x[100] = INFINITY;
    MatVecInt8(w, x.data(), y.data(), nullptr);
    for (float v : y) EXPECT_TRUE(std::isnan(v));
    x[100] = NAN;
    MatVecInt8(w, x.data(), y.data(), nullptr);
    for (float v : y) EXPECT_TRUE(std::isnan(v));
  }
}

// At every ISA level: the AVX-512 kernel, the AVX2 ones (vpmaddubsw; AVX-VNNI), and at the
// scalar level MatMulInt8 on the copy's slabs; all bit-identical to the reference. The row
// counts give the one-token AVX2 pass, which takes a thread's groups two at a time, pairs, an
// odd group left over, and pairs whose second group is partial.
TEST(MatVecInt8Test, InterleavedIsBitIdenticalToReference) {
  std::mt19937 rng(26);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int i = 0;
  testing::ForEachIsa([&](const char* isa) {
    SCOPED_TRACE(isa);
    for (DType type : kInterleavedTypes) {
      for (int64_t c : {32, 96, 128, 544, 2048, 2304}) {
        const int64_t cols = Width(type, c);
        for (int64_t rows : {1, 15, 16, 17, 33, 100, 256}) {
          const int64_t stride = RowBytes(type, cols) + (i % 2 == 1 ? 6 : 0);
          const auto m = RandomMatrix(type, rows, cols, stride, rng);
          MatrixView w{type, m.data(), rows, cols, stride};
          const auto pk = QuantInterleaved::Pack(w);
          ASSERT_TRUE(pk->Matches(w));
          ASSERT_EQ(QuantInterleaved::PackedBytes(w), pk->groups() * pk->group_stride());
          ASSERT_EQ(pk->group_stride() % 64, 0);
          w.prepared = pk.get();
          const auto x = RandomActivations(cols, rng);
          std::vector<float> ref(rows), got(rows + 1, NAN);
          got[rows] = 12345.0f;  // must stay: the last partial group writes only its rows
          MatMulInt8Ref(w, x.data(), 1, ref.data());
          MatVecInt8(w, x.data(), got.data(), pools[i % 3]);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(got[r], ref[r])
                << DTypeName(type) << " rows=" << rows << " cols=" << cols << " r=" << r;
          }
          ASSERT_EQ(got[rows], 12345.0f);
          // And through MatMul's one-token dispatch.
          std::vector<float> via(rows);
          MatMul(w, x.data(), 1, via.data(), pools[i % 3]);
          for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(via[r], ref[r]);
          ++i;
        }
      }
    }
  });
}

// 2-16 tokens on an interleaved copy (decode batches, speculative verification): up to 8
// tokens share a pass over the weights, and every token must still be bit-identical to the
// reference, with nothing written past its rows. Through MatMul, so without VNNI this covers
// its fallback on the copy's slabs.
TEST(MatVecInt8Test, InterleavedTokensAreBitIdenticalToReference) {
  std::mt19937 rng(29);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int i = 0;
  testing::ForEachIsa([&](const char* isa) {
    SCOPED_TRACE(isa);
    for (DType type : kInterleavedTypes) {
      for (int64_t c : {32, 96, 544}) {
        const int64_t cols = Width(type, c);
        for (int64_t rows : {15, 17, 100}) {
          const auto m = RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
          MatrixView w{type, m.data(), rows, cols, RowBytes(type, cols)};
          const auto pk = QuantInterleaved::Pack(w);
          w.prepared = pk.get();
          for (int64_t tokens = 2; tokens <= kInterleavedMaxTokens; ++tokens) {
            const auto x = RandomActivations(tokens * cols, rng);
            std::vector<float> ref(tokens * rows), got(tokens * rows + 1, NAN);
            got.back() = 12345.0f;
            MatMulInt8Ref(w, x.data(), tokens, ref.data());
            MatMul(w, x.data(), tokens, got.data(), pools[i++ % 3]);
            for (int64_t e = 0; e < tokens * rows; ++e) {
              ASSERT_EQ(got[e], ref[e]) << DTypeName(type) << " rows=" << rows << " cols=" << cols
                                        << " tokens=" << tokens << " token " << e / rows
                                        << " row " << e % rows;
            }
            ASSERT_EQ(got.back(), 12345.0f);
          }
        }
      }
    }
  });
}

// Whichever pass the dispatch picks for one token (dispatch.h, InterleavedPass), every pass
// this CPU runs stays bit-identical to the reference, for one matrix and for a fused pair.
TEST(MatVecInt8Test, EveryInterleavedPassIsBitIdenticalToReference) {
  std::mt19937 rng(37);
  if (!InterleavedInt8Available()) GTEST_SKIP() << "no AVX2";
  std::vector<Isa> passes = {Isa::kAvx2};
  if (Cpu().avx_vnni) passes.push_back(Isa::kAvx2Vnni);
  if (Int8MatVecFast()) passes.push_back(Isa::kAvx512);
  ThreadPool pool2(2);
  for (Isa pass : passes) {
    for (DType type : kInterleavedTypes) {
      if (pass == Isa::kAvx512 && type == DType::kQ4_K) continue;
      for (int64_t tokens : {1, 3}) {
        const int64_t cols = Width(type, 544);
        const int64_t rows[2] = {100, 37};
        InterleavedSet set = MakeInterleaved(type, {rows[0], rows[1]}, cols, rng);
        std::vector<MatrixView>& ws = set.ws;
        const MatrixView* wp[2] = {&ws[0], &ws[1]};
        const auto x = RandomActivations(tokens * cols, rng);
        for (int n : {1, 2}) {
          std::vector<float> got[2], ref[2];
          float* yp[2];
          for (int i = 0; i < n; ++i) {
            got[i].assign(tokens * rows[i], NAN);
            ref[i].assign(tokens * rows[i], 0.0f);
            yp[i] = got[i].data();
            MatMulInt8Ref(ws[i], x.data(), tokens, ref[i].data());
          }
          mv8_internal::InterleavedProductsOnPass(wp, yp, n, x.data(), tokens, pass, &pool2);
          for (int i = 0; i < n; ++i) {
            EXPECT_EQ(got[i], ref[i]) << IsaName(pass) << " " << DTypeName(type)
                                      << " tokens=" << tokens << " matrices=" << n << " i=" << i;
          }
        }
        // A gated pair (equal rows): its partner walk on this pass.
        InterleavedSet pair = MakeInterleaved(type, {rows[0], rows[0]}, cols, rng);
        ws = pair.ws;
        std::vector<float> gate(tokens * rows[0], NAN), up(tokens * rows[0], NAN);
        std::vector<float> want(tokens * rows[0]), up_want(tokens * rows[0]);
        MatMulInt8Ref(ws[0], x.data(), tokens, want.data());
        MatMulInt8Ref(ws[1], x.data(), tokens, up_want.data());
        ApplyGlu(GluKind::kSwiGlu, want.data(), up_want.data(), want.data(), tokens * rows[0]);
        float* gy[2] = {gate.data(), up.data()};
        const GluKind glu = GluKind::kSwiGlu;
        mv8_internal::InterleavedProductsOnPass(wp, gy, 2, x.data(), tokens, pass, &pool2, &glu);
        EXPECT_EQ(gate, want) << IsaName(pass) << " " << DTypeName(type) << " gated, tokens="
                              << tokens;
        EXPECT_EQ(up, up_want);
      }
    }
  }
}

TEST(MatVecInt8Test, FusedEqualsOneByOne) {
  std::mt19937 rng(27);
  ThreadPool pool2(2);
  testing::ForEachIsa([&](const char* isa) {
    SCOPED_TRACE(isa);
    if (!InterleavedInt8Available()) return;
    for (DType type : kInterleavedTypes) {
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
        const int64_t cols = 256;
        const int64_t rows[3] = {100, 17, 33};
        InterleavedSet set = MakeInterleaved(type, {rows[0], rows[1], rows[2]}, cols, rng);
        std::vector<MatrixView>& ws = set.ws;
        const auto& pks = set.pks;
        const MatrixView* wp[3] = {&ws[0], &ws[1], &ws[2]};
        ASSERT_TRUE(CanFuseMatVecInt8(wp, 3));
        const auto x = RandomActivations(cols, rng);
        std::vector<float> fused[3], single[3];
        float* yp[3];
        for (int i = 0; i < 3; ++i) {
          fused[i].assign(rows[i], NAN);
          single[i].assign(rows[i], NAN);
          yp[i] = fused[i].data();
          MatVecInt8(ws[i], x.data(), single[i].data(), pool);
        }
        MatVecInt8Fused(wp, yp, 3, x.data(), 1, pool);
        for (int i = 0; i < 3; ++i) EXPECT_EQ(fused[i], single[i]) << DTypeName(type) << " i=" << i;
        // Several tokens (one and two passes over the rows) equal MatMul per matrix.
        for (int64_t tokens : {5, 12}) {
          const auto xt = RandomActivations(tokens * cols, rng);
          for (int i = 0; i < 3; ++i) {
            fused[i].assign(tokens * rows[i], NAN);
            single[i].assign(tokens * rows[i], NAN);
            yp[i] = fused[i].data();
            MatMul(ws[i], xt.data(), tokens, single[i].data(), pool);
          }
          MatVecInt8Fused(wp, yp, 3, xt.data(), tokens, pool);
          for (int i = 0; i < 3; ++i) {
            EXPECT_EQ(fused[i], single[i]) << DTypeName(type) << " tokens=" << tokens << " i=" << i;
          }
        }
        // Not fusable: a matrix without an interleaved copy, or another width.
        ws[1].prepared = nullptr;
        EXPECT_FALSE(CanFuseMatVecInt8(wp, 3));
        ws[1].prepared = pks[1].get();
        ws[2].cols = 512;
        EXPECT_FALSE(CanFuseMatVecInt8(wp, 3));
      }
    }
  });
}

// The gated pair (a feed-forward block's gate and up): each chunk's rows get the activation
// from the thread that computed them. Values equal the products followed by ApplyGlu, for
// group counts odd and even, a partial last group, 1-16 tokens, any pool; MatMulGlu gives the
// same through either path (without interleaved copies, or past kInterleavedMaxTokens).
TEST(MatVecInt8Test, GluEqualsProductsThenActivation) {
  std::mt19937 rng(31);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int p = 0;
  testing::ForEachIsa([&](const char* isa) {
    SCOPED_TRACE(isa);
    if (!InterleavedInt8Available()) return;
    for (DType type : kInterleavedTypes) {
      const int64_t cols = 256;
      for (int64_t rows : {15, 17, 100, 250}) {
        const InterleavedSet set = MakeInterleaved(type, {rows, rows}, cols, rng);
        const MatrixView &wg = set.ws[0], &wu = set.ws[1];
        for (int64_t tokens : {1, 2, 5, 9, 16, 20}) {
          for (GluKind kind : {GluKind::kSwiGlu, GluKind::kGeGlu}) {
            ThreadPool* pool = pools[p++ % 3];
            const auto x = RandomActivations(tokens * cols, rng);
            std::vector<float> want(tokens * rows), up_want(tokens * rows);
            MatMul(wg, x.data(), tokens, want.data(), pool);
            MatMul(wu, x.data(), tokens, up_want.data(), pool);
            ApplyGlu(kind, want.data(), up_want.data(), want.data(), tokens * rows);
            std::vector<float> gate(tokens * rows, NAN), up(tokens * rows, NAN);
            if (tokens <= kInterleavedMaxTokens) {
              MatVecInt8Glu(wg, wu, x.data(), tokens, kind, gate.data(), up.data(), pool);
              ASSERT_EQ(gate, want) << DTypeName(type) << " rows=" << rows << " tokens=" << tokens;
              ASSERT_EQ(up, up_want) << DTypeName(type) << " rows=" << rows << " tokens=" << tokens;
            }
            std::fill(gate.begin(), gate.end(), NAN);
            MatMulGlu(wg, wu, x.data(), tokens, kind, gate.data(), up.data(), pool);
            ASSERT_EQ(gate, want) << "MatMulGlu " << DTypeName(type) << " rows=" << rows
                                  << " tokens=" << tokens;
            // Without the interleaved copies: the products, then the activation.
            MatrixView plain_g = wg, plain_u = wu;
            plain_g.prepared = plain_u.prepared = nullptr;
            std::vector<float> want2(tokens * rows), up2(tokens * rows);
            MatMul(plain_g, x.data(), tokens, want2.data(), pool);
            MatMul(plain_u, x.data(), tokens, up2.data(), pool);
            ApplyGlu(kind, want2.data(), up2.data(), want2.data(), tokens * rows);
            std::fill(gate.begin(), gate.end(), NAN);
            MatMulGlu(plain_g, plain_u, x.data(), tokens, kind, gate.data(), up.data(), pool);
            ASSERT_EQ(gate, want2) << "MatMulGlu without copies " << DTypeName(type)
                                   << " rows=" << rows << " tokens=" << tokens;
            ASSERT_EQ(up, up2);
          }
        }
      }
    }
  });
}

TEST(QuantInterleavedTest, DequantizeRowEqualsReference) {
  std::mt19937 rng(28);
  for (DType type : kInterleavedTypes) {
    for (int64_t rows : {1, 16, 17, 40}) {
      const int64_t cols = Width(type, 96);
      const auto m = RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
      const MatrixView w{type, m.data(), rows, cols, RowBytes(type, cols)};
      const auto pk = QuantInterleaved::Pack(w);
      std::vector<float> want(cols), got(cols);
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRowRef(type, w.row(r), want.data(), cols);
        pk->DequantizeRow(r, got.data());
        ASSERT_EQ(got, want) << DTypeName(type) << " rows=" << rows << " r=" << r;
      }
    }
  }
}

// The decode walk reads a group as one stream: each block's quants, then (at the end of its
// unit) the unit's scales, in increasing addresses, quants 64-byte and scales 32-byte aligned,
// all inside the group.
TEST(QuantInterleavedTest, GroupIsOneIncreasingStream) {
  std::mt19937 rng(30);
  for (DType type : kInterleavedTypes) {
    for (int64_t c : {32, 96, 128, 160, 544, 2304}) {
      const int64_t cols = Width(type, c);
      const int64_t rows = 20;
      const auto m = RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
      const MatrixView w{type, m.data(), rows, cols, RowBytes(type, cols)};
      const auto pk = QuantInterleaved::Pack(w);
      const int64_t U = pk->unit_blocks(), qb = pk->quant_bytes();
      for (int64_t g = 0; g < pk->groups(); ++g) {
        const uint8_t* next = pk->group(g);  // the lowest address the next piece may start at
        for (int64_t b = 0; b < pk->blocks(); ++b) {
          SCOPED_TRACE(std::string(DTypeName(type)) + " cols=" + std::to_string(cols) +
                       " b=" + std::to_string(b));
          const uint8_t* q = pk->block_quants(g, b);
          ASSERT_GE(q, next);
          ASSERT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
          next = q + qb;
          const bool unit_end = b % U == U - 1 || b == pk->blocks() - 1;
          if (!unit_end) continue;
          const uint8_t* s = type == DType::kQ4_K
                                 ? pk->unit_scales(g, b / U)
                                 : reinterpret_cast<const uint8_t*>(pk->block_scales(g, b - b % U));
          if (b % U == U - 1) {
            ASSERT_EQ(s, next);  // right after the unit's last quants
          } else {
            ASSERT_GE(s, next);  // a short last unit keeps a whole unit's room
          }
          ASSERT_EQ(reinterpret_cast<uintptr_t>(s) % 32, 0u);
          next = s + (type == DType::kQ4_K ? QuantInterleaved::kSuperBytes
                                           : (b % U + 1) * 2 * QuantInterleaved::kRows);
        }
        ASSERT_LE(next, pk->group(g) + pk->group_stride());
      }
    }
  }
}

TEST(MatVecInt8Test, MatMulOfOneTokenUsesIt) {
  if (!Int8MatVecFast()) GTEST_SKIP() << "no AVX-512 VNNI/VBMI";
  std::mt19937 rng(25);
  ThreadPool pool2(2);
  for (DType type : kTypes) {
    const int64_t rows = 40, cols = 512;
    const auto m = RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
    const MatrixView w{type, m.data(), rows, cols, RowBytes(type, cols)};
    const auto x = RandomActivations(cols, rng);
    std::vector<float> a(rows), b(rows);
    MatMul(w, x.data(), 1, a.data(), &pool2);
    MatVecInt8(w, x.data(), b.data(), &pool2);
    EXPECT_EQ(a, b);
  }
}

}  // namespace
}  // namespace tarmac::kernels
