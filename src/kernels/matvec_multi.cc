// SIMD MatVecMulti (see matvec_multi.h).

#include "kernels/matvec_multi.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/dequant.h"
#include "kernels/matvec.h"
#include "kernels/shared_ranges.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"
#include "tensor/quant_ref.h"

#ifndef HWY_DISABLED_TARGETS  // see dequant.cc
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec_multi.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Element type of a row as the kernel reads it: f32 in memory, or f16/bf16 widened in
// registers. (Quantized rows arrive here already dequantized to f32.)
enum class Src { kF32, kF16, kBF16 };

template <Src S>
HWY_INLINE VF LoadW(const void* row, int64_t k) {
  const DF df;
  if constexpr (S == Src::kF32) {
    return hn::LoadU(df, static_cast<const float*>(row) + k);
  } else if constexpr (S == Src::kF16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, static_cast<const hwy::float16_t*>(row) + k));
  } else {
    const hn::Rebind<hwy::bfloat16_t, DF> db;
    return hn::PromoteTo(df, hn::LoadU(db, static_cast<const hwy::bfloat16_t*>(row) + k));
  }
}

template <Src S>
HWY_INLINE float ScalarW(const void* row, int64_t k) {
  if constexpr (S == Src::kF32) return static_cast<const float*>(row)[k];
  if constexpr (S == Src::kF16) return F16ToF32(static_cast<const uint16_t*>(row)[k]);
  return BF16ToF32(static_cast<const uint16_t*>(row)[k]);
}

constexpr int64_t kAhead = 3072;  // prefetch distance in bytes

// Lanes 0..3 of the result are the lane sums of v0..v3 (the rest is scratch). One horizontal
// reduction serves four rows, where short rows (a few hundred columns) otherwise pay a
// shuffle chain per row and token (bench/NOTES.md). Needs whole 128-bit blocks (not
// HWY_SCALAR).
#undef TARMAC_BATCHED_SUMS  // this file is compiled once per target
#if HWY_TARGET != HWY_SCALAR
#define TARMAC_BATCHED_SUMS 1
template <class V>
HWY_INLINE V SumOfLanes4(V v0, V v1, V v2, V v3) {
  const DF df;
  const hn::Repartition<double, DF> dd;
  // Per 128-bit block: [v0 v1 v0 v1] and [v2 v3 v2 v3] partial sums...
  const V a = hn::Add(hn::InterleaveLower(df, v0, v1), hn::InterleaveUpper(df, v0, v1));
  const V b = hn::Add(hn::InterleaveLower(df, v2, v3), hn::InterleaveUpper(df, v2, v3));
  // ...then [v0 v1 v2 v3] per block...
  V c = hn::Add(hn::BitCast(df, hn::InterleaveLower(dd, hn::BitCast(dd, a), hn::BitCast(dd, b))),
                hn::BitCast(df, hn::InterleaveUpper(dd, hn::BitCast(dd, a), hn::BitCast(dd, b))));
  // ...and the blocks summed into block 0.
#if HWY_TARGET <= HWY_AVX3
  c = hn::Add(c, hn::SwapAdjacentBlocks(c));
#endif
#if HWY_TARGET <= HWY_AVX2
  c = hn::Add(c, hn::ConcatLowerUpper(df, c, c));
#endif
  return c;
}
#else
#define TARMAC_BATCHED_SUMS 0
#endif

// R rows × T tokens: y[r][t] = row_r · x_t. Rows beyond the real ones repeat the last real
// row (the caller discards their results). R rows share each x load, so x (which for wide
// matrices lives in L2) is read once per R rows; R·T accumulators stay in registers.
template <Src S, int R, int T>
HWY_INLINE void RowBlock(const void* const* rows, const float* HWY_RESTRICT x, int64_t K,
                         float (*y)[T]) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = hn::Zero(df);
  constexpr int64_t kElem = S == Src::kF32 ? 4 : 2;
  int64_t k = 0;
  for (; k + N <= K; k += N) {
    // Stream the rows ~3 KiB ahead into L2 (as MatVec does): the loop alone keeps too few
    // misses in flight to reach DRAM bandwidth, and an L1 hint evicts the x rows. Past the
    // row end this runs into the next rows, which are read next.
    if ((k * kElem) % 64 == 0) {
      for (int r = 0; r < R; ++r)
        __builtin_prefetch(static_cast<const char*>(rows[r]) + k * kElem + kAhead, 0, 2);
    }
    VF w[R];
    for (int r = 0; r < R; ++r) w[r] = LoadW<S>(rows[r], k);
    for (int t = 0; t < T; ++t) {
      const VF xv = hn::LoadU(df, x + t * K + k);
      for (int r = 0; r < R; ++r) acc[r][t] = hn::MulAdd(w[r], xv, acc[r][t]);
    }
  }
#if TARMAC_BATCHED_SUMS
  if constexpr (R % 4 == 0) {
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; r += 4) {
        HWY_ALIGN float s[hn::MaxLanes(df)];
        hn::Store(SumOfLanes4(acc[r][t], acc[r + 1][t], acc[r + 2][t], acc[r + 3][t]), df, s);
        for (int i = 0; i < 4; ++i) y[r + i][t] = s[i];
      }
    }
  } else  // NOLINT(readability/braces)
#endif
  {
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[r][t] = hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      for (int64_t kk = k; kk < K; ++kk) y[r][t] += ScalarW<S>(rows[r], kk) * x[t * K + kk];
    }
  }
}

// Rows per block: 4 rows × up to 6 tokens of accumulators, the 4 row vectors and an x
// vector fit the 32 vector registers (more tokens go in groups: MatVecMultiRows).
constexpr int kBlockRows = 4;

template <Src S, int T>
void RowsST(const MatrixView& w, const float* x, float* y, int64_t r0, int64_t r1) {
  static_assert(T >= 1 && T <= 6);
  constexpr int R = kBlockRows;
  const int64_t K = w.cols;
  const bool convert = w.type != DType::kF32 && w.type != DType::kF16 && w.type != DType::kBF16;
  thread_local AlignedBuffer buf;  // R dequantized rows (quantized dtypes)
  if (convert && buf.size() < sizeof(float) * R * K) buf.Resize(sizeof(float) * R * K);
  float out[R][T];
  for (int64_t r = r0; r < r1; r += R) {
    const int real = static_cast<int>(std::min<int64_t>(R, r1 - r));
    const void* rows[R];
    for (int i = 0; i < R; ++i) {
      const int64_t ri = r + std::min(i, real - 1);
      rows[i] = w.row(ri);
      if (convert && i < real) {
        float* b = buf.as<float>() + i * K;
        DequantizeRow(w.type, rows[i], b, K);
        rows[i] = b;
      } else if (convert) {
        rows[i] = rows[real - 1];
      }
    }
    RowBlock<S, R, T>(rows, x, K, out);
    for (int i = 0; i < real; ++i)
      for (int t = 0; t < T; ++t) y[t * w.rows + r + i] = out[i][t];
  }
}

template <int T>
void RowsT(const MatrixView& w, const float* x, float* y, int64_t r0, int64_t r1) {
  switch (w.type) {
    case DType::kF16: return RowsST<Src::kF16, T>(w, x, y, r0, r1);
    case DType::kBF16: return RowsST<Src::kBF16, T>(w, x, y, r0, r1);
    default: return RowsST<Src::kF32, T>(w, x, y, r0, r1);  // f32, or dequantized
  }
}

void RowsN(const MatrixView& w, const float* x, int64_t n, float* y, int64_t r0, int64_t r1) {
  switch (n) {
    case 1: return RowsT<1>(w, x, y, r0, r1);
    case 2: return RowsT<2>(w, x, y, r0, r1);
    case 3: return RowsT<3>(w, x, y, r0, r1);
    case 4: return RowsT<4>(w, x, y, r0, r1);
    case 5: return RowsT<5>(w, x, y, r0, r1);
    default: return RowsT<6>(w, x, y, r0, r1);
  }
}

// More than 6 tokens: balanced groups of at most 6 (4 rows × 6 tokens fill the registers;
// beyond that a block holds fewer rows and slows down per FMA; bench/NOTES.md) over the same
// few rows, so the rows come from memory once and from L1/L2 for the later groups.
void MatVecMultiRows(const MatrixView& w, const float* x, int64_t n, float* y, int64_t r0,
                     int64_t r1) {
  constexpr int64_t kMaxGroup = 6;
  if (n <= kMaxGroup) return RowsN(w, x, n, y, r0, r1);
  const int64_t groups = (n + kMaxGroup - 1) / kMaxGroup;
  constexpr int64_t kRows = 8;
  for (int64_t r = r0; r < r1; r += kRows) {
    const int64_t re = std::min(r1, r + kRows);
    for (int64_t g = 0, t = 0; g < groups; ++g) {
      const int64_t size = (n - t) / (groups - g);  // the last groups take the remainder
      // y rows of this token group start at y + t * w.rows; x rows at x + t * cols.
      RowsN(w, x + t * w.cols, size, y + t * w.rows, r, re);
      t += size;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {
HWY_EXPORT(MatVecMultiRows);

void MatVecMultiShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                       int64_t n_tokens, ThreadPool* pool) {
  TARMAC_CHECK(n >= 1 && n <= SharedRanges::kMax);
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= kMatVecMultiMaxTokens);
  constexpr int64_t kRowsPerTask = 64;
  int64_t tasks[SharedRanges::kMax];
  for (int i = 0; i < n; ++i) {
    TARMAC_CHECK(IsMatVecType(ws[i]->type) && ws[i]->cols == ws[0]->cols && ws[i]->rows >= 0);
    tasks[i] = (ws[i]->rows + kRowsPerTask - 1) / kRowsPerTask;
  }
  const SharedRanges ranges(tasks, n);  // the matrices' 64-row tasks, one after another
  auto run = [&](int64_t b, int64_t e, int) {
    ranges.ForEach(b, e, [&](int i, int64_t tb, int64_t te) {
      HWY_DYNAMIC_DISPATCH(MatVecMultiRows)(*ws[i], x, n_tokens, ys[i], tb * kRowsPerTask,
                                            std::min(ws[i]->rows, te * kRowsPerTask));
    });
  };
  const int64_t total = ranges.total();
  if (pool == nullptr || pool->num_threads() == 1 || total <= 1) {
    run(0, total, 0);
  } else {
    // Contiguous ranges of tasks, a few per thread (as MatVec): each thread's rows then stream
    // in address order, and the prefetch at the end of a task covers rows the same thread
    // reads next. Tasks dealt one at a time left the first ~3 KiB of every 64-row task
    // unprefetched (slower; bench/NOTES.md).
    pool->ParallelFor(total, std::max<int64_t>(1, total / (pool->num_threads() * 8)), run);
  }
}

void MatVecMulti(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                 ThreadPool* pool) {
  const MatrixView* ws[1] = {&w};
  float* ys[1] = {y};
  MatVecMultiShared(ws, ys, 1, x, n_tokens, pool);
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
