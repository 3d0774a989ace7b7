// SIMD MatVecMulti (see matvec_multi.h).

#include "kernels/matvec_multi.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/dequant.h"
#include "kernels/matvec.h"
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

// Two rows × T tokens: y0[t] = row0 · x_t, y1[t] = row1 · x_t (row1 may equal row0 for an odd
// last row; its result is then discarded by the caller).
template <Src S, int T>
HWY_INLINE void TwoRows(const void* row0, const void* row1, const float* HWY_RESTRICT x,
                        int64_t K, float* y0, float* y1) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF a0[T], a1[T];
  for (int t = 0; t < T; ++t) a0[t] = a1[t] = hn::Zero(df);
  constexpr int64_t kElem = S == Src::kF32 ? 4 : 2;
  const char* p0 = static_cast<const char*>(row0);
  const char* p1 = static_cast<const char*>(row1);
  int64_t k = 0;
  for (; k + N <= K; k += N) {
    // Stream the rows ~3 KiB ahead (as MatVec does): the loop alone keeps too few misses in
    // flight to reach DRAM bandwidth. Past the row end this runs into the next rows, which are
    // read next.
    if ((k * kElem) % 64 == 0) {
      __builtin_prefetch(p0 + k * kElem + kAhead, 0, 3);
      __builtin_prefetch(p1 + k * kElem + kAhead, 0, 3);
    }
    const VF w0 = LoadW<S>(row0, k);
    const VF w1 = LoadW<S>(row1, k);
    for (int t = 0; t < T; ++t) {
      const VF xv = hn::LoadU(df, x + t * K + k);
      a0[t] = hn::MulAdd(w0, xv, a0[t]);
      a1[t] = hn::MulAdd(w1, xv, a1[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    float s0 = hn::GetLane(hn::SumOfLanes(df, a0[t]));
    float s1 = hn::GetLane(hn::SumOfLanes(df, a1[t]));
    for (int64_t kk = k; kk < K; ++kk) {
      s0 += ScalarW<S>(row0, kk) * x[t * K + kk];
      s1 += ScalarW<S>(row1, kk) * x[t * K + kk];
    }
    y0[t] = s0;
    y1[t] = s1;
  }
}

template <Src S, int T>
void RowsST(const MatrixView& w, const float* x, float* y, int64_t r0, int64_t r1) {
  const int64_t K = w.cols;
  thread_local AlignedBuffer buf;  // two dequantized rows (quantized dtypes)
  float y0[T], y1[T];
  for (int64_t r = r0; r < r1; r += 2) {
    const bool pair = r + 1 < r1;
    const void* row0 = w.row(r);
    const void* row1 = pair ? w.row(r + 1) : row0;
    if (w.type != DType::kF32 && w.type != DType::kF16 && w.type != DType::kBF16) {
      if (buf.size() < sizeof(float) * 2 * K) buf.Resize(sizeof(float) * 2 * K);
      float* b = buf.as<float>();
      DequantizeRow(w.type, row0, b, K);
      if (pair) DequantizeRow(w.type, row1, b + K, K);
      row0 = b;
      row1 = pair ? b + K : b;
    }
    TwoRows<S, T>(row0, row1, x, K, y0, y1);
    for (int t = 0; t < T; ++t) {
      y[t * w.rows + r] = y0[t];
      if (pair) y[t * w.rows + r + 1] = y1[t];
    }
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
    case 6: return RowsT<6>(w, x, y, r0, r1);
    case 7: return RowsT<7>(w, x, y, r0, r1);
    default: return RowsT<8>(w, x, y, r0, r1);
  }
}

// More than 8 tokens: groups of at most 8 over the same few rows, so the rows come from
// DRAM once and from L2 for the later groups.
void MatVecMultiRows(const MatrixView& w, const float* x, int64_t n, float* y, int64_t r0,
                     int64_t r1) {
  if (n <= 8) return RowsN(w, x, n, y, r0, r1);
  constexpr int64_t kRows = 8;
  for (int64_t r = r0; r < r1; r += kRows) {
    const int64_t re = std::min(r1, r + kRows);
    for (int64_t t = 0; t < n; t += 8) {
      // y rows of this token group start at y + t * w.rows; x rows at x + t * cols.
      RowsN(w, x + t * w.cols, std::min<int64_t>(8, n - t), y + t * w.rows, r, re);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {
HWY_EXPORT(MatVecMultiRows);

void MatVecMulti(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                 ThreadPool* pool) {
  TARMAC_CHECK(IsMatVecType(w.type));
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= kMatVecMultiMaxTokens);
  if (w.rows == 0) return;
  constexpr int64_t kRowsPerTask = 64;
  const int64_t tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  auto run = [&](int64_t b, int64_t e, int) {
    HWY_DYNAMIC_DISPATCH(MatVecMultiRows)(w, x, n_tokens, y, b * kRowsPerTask,
                                          std::min(w.rows, e * kRowsPerTask));
  };
  if (pool == nullptr || pool->num_threads() == 1 || tasks == 1) {
    run(0, tasks, 0);
  } else {
    pool->ParallelFor(tasks, 1, run);
  }
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
