// SIMD DequantizeRow. Each block type is decoded with integer ops on lanes widened to i32,
// converted to f32 exactly, then scaled with the same float operations as the reference (no
// FMA contraction: the project builds in ISO mode, -ffp-contract=off), hence bit-exact.

#include "kernels/dequant.h"
#include "kernels/dequant_blocks.h"

#include <cstring>

#include "base/check.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

// SSSE3/SSE4 are skipped to halve compile time; such machines get the portable baseline
// (HWY_SCALAR with this Highway build).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequant.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/half_scalar-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

void DequantF16(const uint16_t* src, float* dst, int64_t n) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const int64_t N = hn::Lanes(df);
  int64_t i = 0;
  for (; TARMAC_HWY_HARDWARE_F16 && i + N <= n; i += N) {
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + i))),
               df, dst + i);
  }
  for (; i < n; ++i) dst[i] = HalfToF32(src[i]);
}

void DequantBF16(const uint16_t* src, float* dst, int64_t n) {
  const DF df;
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToSigned<DF> di;
  const int64_t N = hn::Lanes(df);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto bits = hn::ShiftLeft<16>(hn::PromoteTo(di, hn::LoadU(du16, src + i)));
    hn::StoreU(hn::BitCast(df, bits), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = BF16ToF32(src[i]);
}

void DequantQ8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  const DF df;
  const hn::Rebind<int8_t, DF> d8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  for (int64_t i = 0; i < nb; ++i) {
    const auto d = hn::Set(df, HalfToF32(b[i].d));
    for (size_t j = 0; j < kQK8_0; j += N) {
      const auto q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, b[i].qs + j)));
      hn::StoreU(hn::Mul(d, q), df, y + i * kQK8_0 + j);
    }
  }
}

void DequantQ4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  const DF df;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  const auto k8 = hn::Set(di, 8);
  const auto k15 = hn::Set(di, 15);
  for (int64_t i = 0; i < nb; ++i) {
    const auto d = hn::Set(df, HalfToF32(b[i].d));
    for (size_t j = 0; j < kQK4_0 / 2; j += N) {
      const auto q = hn::PromoteTo(di, hn::LoadU(du8, b[i].qs + j));
      const auto lo = hn::ConvertTo(df, hn::Sub(hn::And(q, k15), k8));
      const auto hi = hn::ConvertTo(df, hn::Sub(hn::ShiftRight<4>(q), k8));
      hn::StoreU(hn::Mul(d, lo), df, y + i * kQK4_0 + j);
      hn::StoreU(hn::Mul(d, hi), df, y + i * kQK4_0 + 16 + j);
    }
  }
}

void DequantQ4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  const DF df;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  const auto k15 = hn::Set(di, 15);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToF32(b[i].d);
    const float dmin = HalfToF32(b[i].dmin);
    float* out = y + i * kQK_K;
    for (int pair = 0; pair < 4; ++pair) {
      uint8_t sc, m;
      Q4KScaleMin(2 * pair, b[i].scales, &sc, &m);
      const auto d1 = hn::Set(df, d * sc), m1 = hn::Set(df, dmin * m);
      Q4KScaleMin(2 * pair + 1, b[i].scales, &sc, &m);
      const auto d2 = hn::Set(df, d * sc), m2 = hn::Set(df, dmin * m);
      const uint8_t* q = b[i].qs + 32 * pair;
      for (size_t l = 0; l < 32; l += N) {
        const auto v = hn::PromoteTo(di, hn::LoadU(du8, q + l));
        const auto lo = hn::ConvertTo(df, hn::And(v, k15));
        const auto hi = hn::ConvertTo(df, hn::ShiftRight<4>(v));
        hn::StoreU(hn::Sub(hn::Mul(d1, lo), m1), df, out + 64 * pair + l);
        hn::StoreU(hn::Sub(hn::Mul(d2, hi), m2), df, out + 64 * pair + 32 + l);
      }
    }
  }
}

void DequantQ6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  const DF df;
  const hn::Rebind<uint8_t, DF> du8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  const auto k15 = hn::Set(di, 15), k48 = hn::Set(di, 48), k32 = hn::Set(di, 32);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = HalfToF32(b[i].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* sc = b[i].scales + 8 * half;
      float* out = y + i * kQK_K + 128 * half;
      // N divides 16, so a chunk never straddles two 16-element scale groups.
      for (size_t l = 0; l < 32; l += N) {
        const size_t is = l / 16;
        const auto a = hn::PromoteTo(di, hn::LoadU(du8, ql + l));
        const auto c = hn::PromoteTo(di, hn::LoadU(du8, ql + 32 + l));
        const auto h = hn::PromoteTo(di, hn::LoadU(du8, qh + l));
        const auto q1 = hn::Or(hn::And(a, k15), hn::And(hn::ShiftLeft<4>(h), k48));
        const auto q2 = hn::Or(hn::And(c, k15), hn::And(hn::ShiftLeft<2>(h), k48));
        const auto q3 = hn::Or(hn::ShiftRight<4>(a), hn::And(h, k48));
        const auto q4 = hn::Or(hn::ShiftRight<4>(c), hn::And(hn::ShiftRight<2>(h), k48));
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is]), hn::ConvertTo(df, hn::Sub(q1, k32))), df,
                   out + l);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 2]), hn::ConvertTo(df, hn::Sub(q2, k32))), df,
                   out + 32 + l);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 4]), hn::ConvertTo(df, hn::Sub(q3, k32))), df,
                   out + 64 + l);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 6]), hn::ConvertTo(df, hn::Sub(q4, k32))), df,
                   out + 96 + l);
      }
    }
  }
}

void DequantQ8_K(const BlockQ8_K* b, float* y, int64_t nb) {
  const DF df;
  const hn::Rebind<int8_t, DF> d8;
  const hn::RebindToSigned<DF> di;
  const size_t N = hn::Lanes(df);
  for (int64_t i = 0; i < nb; ++i) {
    const auto d = hn::Set(df, b[i].d);
    for (size_t j = 0; j < kQK_K; j += N) {
      const auto q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, b[i].qs + j)));
      hn::StoreU(hn::Mul(d, q), df, y + i * kQK_K + j);
    }
  }
}

void DequantizeRowT(DType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / Traits(type).block_size;
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kF16: return DequantF16(static_cast<const uint16_t*>(src), dst, n);
    case DType::kBF16: return DequantBF16(static_cast<const uint16_t*>(src), dst, n);
    case DType::kQ8_0: return DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::kQ4_0: return DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::kQ4_K: return DequantQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::kQ6_K: return DequantQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
    case DType::kQ8_K: return DequantQ8_K(static_cast<const BlockQ8_K*>(src), dst, nb);
    // The other types decode through the reference until they have SIMD kernels of their own.
    default: return DequantizeRowRef(type, src, dst, n);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {
HWY_EXPORT(DequantizeRowT);

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  TARMAC_CHECK(IsComputeType(type));
  TARMAC_CHECK(n >= 0 && n % Traits(type).block_size == 0);
  if (n == 0) return;
  // The block types the Highway decoders here do not cover decode with MatVecBlocks' units.
  if (DequantizeBlocksAvailable(type)) return DequantizeBlocksRow(type, src, dst, n);
  HWY_DYNAMIC_DISPATCH(DequantizeRowT)(type, src, dst, n);
}
}  // namespace tarmac::kernels
#endif  // HWY_ONCE
