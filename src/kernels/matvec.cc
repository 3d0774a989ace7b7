// SIMD Dot/MatVec. Per block the quants are widened to i32 lanes, converted to f32 and
// multiplied with x by FMA; the block scale is applied once per block (or 16/32-element group)
// and constant offsets are folded in through precomputed sums of x, so the hot loop per
// 16 weights is: one widening load, one or two integer ops, one convert, one FMA.

#include "kernels/matvec.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

#ifndef HWY_DISABLED_TARGETS
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

// Plain types: four independent accumulators hide the FMA latency. load(i) returns lanes
// [i, i+N) of the row as f32; scalar(i) element i (for the tail).
template <class LoadFn, class ScalarFn>
HWY_INLINE float DotPlain(const float* x, int64_t n, const LoadFn& load, const ScalarFn& scalar) {
  const DF df;
  const int64_t N = hn::Lanes(df);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
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
      [&](int64_t i) { return HalfToF32(w[i]); });
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
      [&](int64_t i) { return BF16ToF32(w[i]); });
}

// q·x of one Q8_0 block as a vector of partial sums.
HWY_INLINE hn::Vec<DF> BlockQ8_0Dot(const BlockQ8_0& b, const float* x) {
  const DF df;
  const hn::Rebind<int8_t, DF> d8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  auto s = hn::Zero(df);
  for (size_t j = 0; j < kQK8_0; j += N) {
    const auto q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, b.qs + j)));
    s = hn::MulAdd(q, hn::LoadU(df, x + j), s);
  }
  return s;
}

float DotQ8_0(const BlockQ8_0* b, const float* x, int64_t nb) {
  const DF df;
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    a0 = hn::MulAdd(hn::Set(df, HalfToF32(b[i].d)), BlockQ8_0Dot(b[i], x + i * kQK8_0), a0);
    a1 = hn::MulAdd(hn::Set(df, HalfToF32(b[i + 1].d)),
                    BlockQ8_0Dot(b[i + 1], x + (i + 1) * kQK8_0), a1);
  }
  if (i < nb) a0 = hn::MulAdd(hn::Set(df, HalfToF32(b[i].d)), BlockQ8_0Dot(b[i], x + i * kQK8_0), a0);
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1)));
}

// q·x of one Q4_0 block with the unsigned nibbles (the -8 is applied by the caller).
HWY_INLINE hn::Vec<DF> BlockQ4_0Dot(const BlockQ4_0& b, const float* x) {
  const DF df;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  auto s0 = hn::Zero(df), s1 = hn::Zero(df);
  for (size_t j = 0; j < kQK4_0 / 2; j += N) {
    const auto q = hn::PromoteTo(di, hn::LoadU(du8, b.qs + j));
    s0 = hn::MulAdd(hn::ConvertTo(df, hn::And(q, hn::Set(di, 15))), hn::LoadU(df, x + j), s0);
    s1 = hn::MulAdd(hn::ConvertTo(df, hn::ShiftRight<4>(q)), hn::LoadU(df, x + 16 + j), s1);
  }
  return hn::Add(s0, s1);
}

// xs32[b] = sum of x over block b of 32.
float DotQ4_0(const BlockQ4_0* b, const float* x, const float* xs32, int64_t nb) {
  const DF df;
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  float corr0 = 0, corr1 = 0;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const float d0 = HalfToF32(b[i].d), d1 = HalfToF32(b[i + 1].d);
    a0 = hn::MulAdd(hn::Set(df, d0), BlockQ4_0Dot(b[i], x + i * kQK4_0), a0);
    a1 = hn::MulAdd(hn::Set(df, d1), BlockQ4_0Dot(b[i + 1], x + (i + 1) * kQK4_0), a1);
    corr0 += d0 * xs32[i];
    corr1 += d1 * xs32[i + 1];
  }
  if (i < nb) {
    const float d0 = HalfToF32(b[i].d);
    a0 = hn::MulAdd(hn::Set(df, d0), BlockQ4_0Dot(b[i], x + i * kQK4_0), a0);
    corr0 += d0 * xs32[i];
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1))) - 8.0f * (corr0 + corr1);
}

float DotQ4_K(const BlockQ4_K* b, const float* x, const float* xs32, int64_t nb) {
  const DF df;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  const auto k15 = hn::Set(di, 15);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  float corr = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToF32(b[i].d), dmin = HalfToF32(b[i].dmin);
    const float* xb = x + i * kQK_K;
    const float* sb = xs32 + i * 8;
    for (int pair = 0; pair < 4; ++pair) {
      uint8_t sc0, m0, sc1, m1;
      Q4KScaleMin(2 * pair, b[i].scales, &sc0, &m0);
      Q4KScaleMin(2 * pair + 1, b[i].scales, &sc1, &m1);
      const uint8_t* q = b[i].qs + 32 * pair;
      auto s0 = hn::Zero(df), s1 = hn::Zero(df);
      for (size_t l = 0; l < 32; l += N) {
        const auto v = hn::PromoteTo(di, hn::LoadU(du8, q + l));
        s0 = hn::MulAdd(hn::ConvertTo(df, hn::And(v, k15)), hn::LoadU(df, xb + 64 * pair + l), s0);
        s1 = hn::MulAdd(hn::ConvertTo(df, hn::ShiftRight<4>(v)),
                        hn::LoadU(df, xb + 64 * pair + 32 + l), s1);
      }
      a0 = hn::MulAdd(hn::Set(df, d * sc0), s0, a0);
      a1 = hn::MulAdd(hn::Set(df, d * sc1), s1, a1);
      corr += dmin * (m0 * sb[2 * pair] + m1 * sb[2 * pair + 1]);
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1))) - corr;
}

// xs16[g] = sum of x over group g of 16 (one Q6_K scale each).
float DotQ6_K(const BlockQ6_K* b, const float* x, const float* xs16, int64_t nb) {
  const DF df;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  const auto k15 = hn::Set(di, 15), k48 = hn::Set(di, 48);
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  float corr = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToF32(b[i].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* sc = b[i].scales + 8 * half;
      const float* xb = x + i * kQK_K + 128 * half;
      const float* gs = xs16 + i * 16 + 8 * half;
      // Group g (16 elements, scale sc[g]) covers out[16g .. 16g+16); out[32k + l] is
      // quant k of position l below, so its group is 2k + l/16.
      for (int g = 0; g < 8; ++g) corr += (d * sc[g]) * gs[g];
      for (size_t l = 0; l < 32; l += N) {
        const size_t is = l / 16;  // N divides 16: a chunk never straddles two groups
        const auto a = hn::PromoteTo(di, hn::LoadU(du8, ql + l));
        const auto c = hn::PromoteTo(di, hn::LoadU(du8, ql + 32 + l));
        const auto h = hn::PromoteTo(di, hn::LoadU(du8, qh + l));
        const auto q1 = hn::Or(hn::And(a, k15), hn::And(hn::ShiftLeft<4>(h), k48));
        const auto q2 = hn::Or(hn::And(c, k15), hn::And(hn::ShiftLeft<2>(h), k48));
        const auto q3 = hn::Or(hn::ShiftRight<4>(a), hn::And(h, k48));
        const auto q4 = hn::Or(hn::ShiftRight<4>(c), hn::And(hn::ShiftRight<2>(h), k48));
        a0 = hn::MulAdd(hn::Mul(hn::ConvertTo(df, q1), hn::Set(df, d * sc[is])),
                        hn::LoadU(df, xb + l), a0);
        a1 = hn::MulAdd(hn::Mul(hn::ConvertTo(df, q2), hn::Set(df, d * sc[is + 2])),
                        hn::LoadU(df, xb + 32 + l), a1);
        a2 = hn::MulAdd(hn::Mul(hn::ConvertTo(df, q3), hn::Set(df, d * sc[is + 4])),
                        hn::LoadU(df, xb + 64 + l), a2);
        a3 = hn::MulAdd(hn::Mul(hn::ConvertTo(df, q4), hn::Set(df, d * sc[is + 6])),
                        hn::LoadU(df, xb + 96 + l), a3);
      }
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)))) -
         32.0f * corr;
}

// y[r] = dot(row r, x) for r in [r0, r1). xs16/xs32: group sums of x.
void DotRowsT(DType type, const uint8_t* w, int64_t stride, int64_t n, const float* x,
              const float* xs16, const float* xs32, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * stride;
    float v = 0;
    switch (type) {
      case DType::kF32: v = DotF32(reinterpret_cast<const float*>(row), x, n); break;
      case DType::kF16: v = DotF16(reinterpret_cast<const uint16_t*>(row), x, n); break;
      case DType::kBF16: v = DotBF16(reinterpret_cast<const uint16_t*>(row), x, n); break;
      case DType::kQ8_0:
        v = DotQ8_0(reinterpret_cast<const BlockQ8_0*>(row), x, n / kQK8_0);
        break;
      case DType::kQ4_0:
        v = DotQ4_0(reinterpret_cast<const BlockQ4_0*>(row), x, xs32, n / kQK4_0);
        break;
      case DType::kQ4_K:
        v = DotQ4_K(reinterpret_cast<const BlockQ4_K*>(row), x, xs32, n / kQK_K);
        break;
      case DType::kQ6_K:
        v = DotQ6_K(reinterpret_cast<const BlockQ6_K*>(row), x, xs16, n / kQK_K);
        break;
      default: TARMAC_CHECK(false);
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

bool IsMatVecType(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

namespace {

// Sums of x over groups of 16 and 32 (only for the types that fold offsets through them).
struct XSums {
  std::vector<float> s16, s32;
  XSums(DType type, const float* x, int64_t n) {
    if (type != DType::kQ4_0 && type != DType::kQ4_K && type != DType::kQ6_K) return;
    s16.resize(n / 16);
    for (int64_t g = 0; g < n / 16; ++g) {
      float s = 0;
      for (int j = 0; j < 16; ++j) s += x[16 * g + j];
      s16[g] = s;
    }
    s32.resize(n / 32);
    for (int64_t g = 0; g < n / 32; ++g) s32[g] = s16[2 * g] + s16[2 * g + 1];
  }
};

void CheckShape(DType type, int64_t n) {
  TARMAC_CHECK(IsMatVecType(type));
  TARMAC_CHECK(n >= 0 && n % Traits(type).block_size == 0);
}

}  // namespace

float Dot(DType type, const void* row, const float* x, int64_t n) {
  CheckShape(type, n);
  if (n == 0) return 0.0f;
  const XSums xs(type, x, n);
  float y;
  HWY_DYNAMIC_DISPATCH(DotRowsT)(type, static_cast<const uint8_t*>(row), 0, n, x, xs.s16.data(),
                                 xs.s32.data(), &y, 0, 1);
  return y;
}

void MatVec(const MatrixView& w, const float* x, float* y, ThreadPool* pool) {
  CheckShape(w.type, w.cols);
  TARMAC_CHECK(w.rows >= 0);
  TARMAC_CHECK(w.rows <= 1 || w.row_stride >= RowBytes(w.type, w.cols));
  if (w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y, y + w.rows, 0.0f);
    return;
  }
  const XSums xs(w.type, x, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  auto run = [&](int64_t r0, int64_t r1, int) {
    HWY_DYNAMIC_DISPATCH(DotRowsT)(w.type, base, w.row_stride, w.cols, x, xs.s16.data(),
                                   xs.s32.data(), y, r0, r1);
  };
  const int threads = pool ? pool->num_threads() : 1;
  if (threads == 1 || w.rows < 2) {
    run(0, w.rows, 0);
    return;
  }
  // Contiguous chunks keep each thread's reads sequential (hardware prefetch); a few chunks
  // per thread balance threads that get descheduled or start late.
  const int64_t grain = std::max<int64_t>(1, w.rows / (threads * 8));
  pool->ParallelFor(w.rows, grain, run);
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
