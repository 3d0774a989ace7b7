// SIMD Dot/MatVec. F32/F16/BF16 rows: widen to f32 and FMA with x (here). Quantized rows
// (matvec_quant-inl.h): x is quantized to int16 once per call, each block's nibbles/bytes are
// widened to i16 and multiplied pairwise with x (vpmaddwd), and the i32 sums are converted
// and scaled once per block or 16-element group; offsets and mins fold in through sums of x.
// The loops are written so the vector ports only do that arithmetic: block scales are gathered
// with plain loads and converted a chunk at a time, and rows are software-prefetched ~3 KiB
// ahead (the decode work otherwise keeps too few cache misses in flight).

#include "kernels/matvec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/shared_ranges.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

#ifndef HWY_DISABLED_TARGETS  // see dequant.cc
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matvec.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/half_scalar-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// Software prefetch of [p, p + bytes) into L1/L2, one hint per cache line. The decode loops
// are heavy enough that the out-of-order window alone keeps too few misses in flight; asking
// ~1-2 KiB ahead lets the row stream at DRAM speed. Harmless past the end of the matrix.
HWY_INLINE void PrefetchBytes(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  // Into L2 only (T1 hint): an L1 hint evicts x (slower for f16; bench/NOTES.md).
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 2);
}

// How far ahead of the current block the row is prefetched; spread one or two hints per
// loop iteration (a burst of hints would fill the line-fill buffers and stall).
constexpr size_t kPrefetchAhead = 3072;

// Plain types: four independent accumulators hide the FMA latency. load(i) returns lanes
// [i, i+N) of the row as f32; scalar(i) element i (for the tail).
template <class LoadFn, class ScalarFn>
// prefetch_row/elem_bytes: prefetch the row (elem_bytes per element) kPrefetchAhead ahead;
// null for none (f32 streams fast enough without).
HWY_INLINE float DotPlain(const float* x, int64_t n, const LoadFn& load, const ScalarFn& scalar,
                          const void* prefetch_row = nullptr, int64_t elem_bytes = 0) {
  const DF df;
  const int64_t N = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    if (prefetch_row != nullptr) {
      PrefetchBytes(static_cast<const char*>(prefetch_row) + i * elem_bytes + kPrefetchAhead,
                    4 * N * elem_bytes);
    }
    a0 = hn::MulAdd(load(i), hn::LoadU(df, x + i), a0);
    a1 = hn::MulAdd(load(i + N), hn::LoadU(df, x + i + N), a1);
    a2 = hn::MulAdd(load(i + 2 * N), hn::LoadU(df, x + i + 2 * N), a2);
    a3 = hn::MulAdd(load(i + 3 * N), hn::LoadU(df, x + i + 3 * N), a3);
  }
  for (; i + N <= n; i += N) a0 = hn::MulAdd(load(i), hn::LoadU(df, x + i), a0);
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) s += scalar(i) * x[i];
  return s;
}

float DotF32(const float* w, const float* x, int64_t n) {
  const DF df;
  return DotPlain(
      x, n, [&](int64_t i) { return hn::LoadU(df, w + i); }, [&](int64_t i) { return w[i]; });
}

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const auto* wh = reinterpret_cast<const hwy::float16_t*>(w);
  if (!TARMAC_HWY_HARDWARE_F16) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += HalfToF32(w[i]) * x[i];
    return s;
  }
  return DotPlain(
      x, n, [&](int64_t i) { return hn::PromoteTo(df, hn::LoadU(dh, wh + i)); },
      [&](int64_t i) { return HalfToF32(w[i]); }, w, 2);
}

float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  const DF df;
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToSigned<DF> di;
  return DotPlain(
      x, n,
      [&](int64_t i) {
        return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(di, hn::LoadU(du16, w + i))));
      },
      [&](int64_t i) { return BF16ToF32(w[i]); }, w, 2);
}

#include "kernels/matvec_quant-inl.h"

// A type without a dot kernel of its own: its row decoded to f32 (the reference decode) in a
// per-thread buffer that only grows, then the f32 dot.
float DotDequantized(DType type, const uint8_t* row, const float* x, int64_t n) {
  static thread_local std::vector<float> buf;
  if (buf.size() < static_cast<size_t>(n)) buf.resize(n);
  DequantizeRowRef(type, row, buf.data(), n);
  return DotF32(buf.data(), x, n);
}

// y[r] = dot(row r, x) for r in [r0, r1); xq: x quantized (quantized weight types only).
void DotRowsT(DType type, const uint8_t* w, int64_t stride, int64_t n, const float* x,
              const int16_t* xq, const float* aux, float* y, int64_t r0, int64_t r1) {
  const ActQ16 act{xq, aux, aux + n / 32, aux + n / 16, aux + n / 16 + n / 16};
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * stride;
    float v = 0;
    switch (type) {
      case DType::kF32: v = DotF32(reinterpret_cast<const float*>(row), x, n); break;
      case DType::kF16: v = DotF16(reinterpret_cast<const uint16_t*>(row), x, n); break;
      case DType::kBF16: v = DotBF16(reinterpret_cast<const uint16_t*>(row), x, n); break;
      case DType::kQ8_0:
        v = DotQ8_0(reinterpret_cast<const BlockQ8_0*>(row), act, n / kQK8_0);
        break;
      case DType::kQ4_0:
        v = DotQ4_0(reinterpret_cast<const BlockQ4_0*>(row), act, n / kQK4_0);
        break;
      case DType::kQ4_K:
        v = DotQ4_K(reinterpret_cast<const BlockQ4_K*>(row), act, n / kQK_K);
        break;
      case DType::kQ6_K:
        v = DotQ6_K(reinterpret_cast<const BlockQ6_K*>(row), act, n / kQK_K);
        break;
      default: v = DotDequantized(type, row, x, n); break;
    }
    y[r] = v;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {
HWY_EXPORT(DotRowsT);
HWY_EXPORT(QuantizeActT);
HWY_EXPORT(Q4_0PairLayoutT);

bool IsMatVecType(DType type) {
  // Every compute type except Q8_K, which exists only as an activation format.
  return IsComputeType(type) && type != DType::kQ8_K;
}

namespace {

// x quantized to int16 per 32-element block, for the quantized weight types (see ActQ16).
// The storage is per thread and only grows, so decode steps allocate nothing once warm; the
// pointers stay valid until the same thread builds the next ActBuffers.
struct ActBuffers {
  int16_t* q = nullptr;
  float* aux = nullptr;
  ActBuffers(DType type, const float* x, int64_t n) {
    if (type != DType::kQ8_0 && type != DType::kQ4_0 && type != DType::kQ4_K &&
        type != DType::kQ6_K) {
      return;
    }
    static thread_local std::vector<int16_t> q_store;
    static thread_local std::vector<float> aux_store;
    const size_t n_aux = static_cast<size_t>(n / 32 * 2 + n / 16 * 2);
    if (q_store.size() < static_cast<size_t>(n)) q_store.resize(n);
    if (aux_store.size() < n_aux) aux_store.resize(n_aux);
    q = q_store.data();
    aux = aux_store.data();
    HWY_DYNAMIC_DISPATCH(QuantizeActT)(x, n, q, aux);
    if (type == DType::kQ4_0 && HWY_DYNAMIC_DISPATCH(Q4_0PairLayoutT)()) {
      int16_t tmp[64];
      for (int64_t p = 0; p + 64 <= n; p += 64) {
        for (int k = 0; k < 16; ++k) {
          tmp[k] = q[p + k];
          tmp[16 + k] = q[p + 32 + k];
          tmp[32 + k] = q[p + 16 + k];
          tmp[48 + k] = q[p + 48 + k];
        }
        std::copy(tmp, tmp + 64, q + p);
      }
    }
  }
};

}  // namespace

namespace {
void CheckShape(DType type, int64_t n) {
  TARMAC_CHECK(IsMatVecType(type));
  TARMAC_CHECK(n >= 0 && n % Traits(type).block_size == 0);
}

}  // namespace

float Dot(DType type, const void* row, const float* x, int64_t n) {
  CheckShape(type, n);
  if (n == 0) return 0.0f;
  const ActBuffers act(type, x, n);
  float y;
  HWY_DYNAMIC_DISPATCH(DotRowsT)(type, static_cast<const uint8_t*>(row), 0, n, x, act.q,
                                 act.aux, &y, 0, 1);
  return y;
}

void MatVecShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                  ThreadPool* pool) {
  TARMAC_CHECK(n >= 1 && n <= SharedRanges::kMax);
  const DType type = ws[0]->type;
  const int64_t cols = ws[0]->cols;
  CheckShape(type, cols);
  int64_t rows[SharedRanges::kMax];
  for (int i = 0; i < n; ++i) {
    TARMAC_CHECK(ws[i]->type == type && ws[i]->cols == cols && ws[i]->rows >= 0);
    TARMAC_CHECK(ws[i]->rows <= 1 || ws[i]->row_stride >= RowBytes(type, cols));
    rows[i] = ws[i]->rows;
  }
  const SharedRanges ranges(rows, n);  // the matrices' rows, one after another
  if (ranges.total() == 0) return;  // x is not read (it may be empty)
  if (cols == 0) {
    for (int i = 0; i < n; ++i) std::fill(ys[i], ys[i] + rows[i], 0.0f);
    return;
  }
  const ActBuffers act(type, x, cols);  // x prepared once for all
  auto run = [&](int64_t r0, int64_t r1, int) {
    ranges.ForEach(r0, r1, [&](int i, int64_t a, int64_t b) {
      HWY_DYNAMIC_DISPATCH(DotRowsT)(type, static_cast<const uint8_t*>(ws[i]->data),
                                     ws[i]->row_stride, cols, x, act.q, act.aux, ys[i], a, b);
    });
  };
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t total = ranges.total();
  if (threads == 1 || total < 2) {
    run(0, total, 0);
    return;
  }
  pool->ParallelFor(total, std::max<int64_t>(1, total / (threads * 8)), run);
}

void MatVec(const MatrixView& w, const float* x, float* y, ThreadPool* pool) {
  const MatrixView* ws[1] = {&w};
  float* ys[1] = {y};
  MatVecShared(ws, ys, 1, x, pool);
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
