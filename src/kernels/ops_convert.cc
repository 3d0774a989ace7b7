// Highway F16/BF16 <-> F32 row conversion (see ops.h).
//
// F16: on x86 targets with F16C (AVX2, AVX-512) the hardware converts (vcvtph2ps, and vcvtps2ph
// with round-to-nearest-even), which matches the scalar reference (tensor/fp16.h) bit for bit
// except on NaN: the hardware quiets signalling NaNs and keeps payloads where the reference does
// not. So a vector holding any NaN (rare: a NaN in the KV cache is already a bug upstream) takes
// an integer-SIMD path that reproduces the reference exactly. Targets without F16C always use
// the integer path (Highway 1.0.3's own emulation there truncates instead of rounding).
// BF16: integer SIMD everywhere (a shift one way; round-to-nearest-even on the bits the other).
// AVX512-BF16's vcvtneps2bf16 is not used: it flushes subnormals, the reference keeps them.

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops_convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h, which re-includes this file once per target.
#include "hwy/highway.h"
// clang-format on

#include <cstring>

#include "base/check.h"
#include "kernels/ops.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// Internal linkage: other kernel files compile helpers into the same per-target namespaces,
// and an equally named inline helper there would silently violate the ODR.
namespace {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using D16 = hn::Rebind<uint16_t, DF>;  // half-width vector: as many u16 lanes as DF has f32
using V16 = hn::Vec<D16>;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

HWY_INLINE VF HalfToFloat(V16 h16) {
  const DF df;
  const DU du;
  const auto h = hn::PromoteTo(du, h16);
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  // Exponent and mantissa moved into f32 position; rebias 15 -> 127 by adding 112 << 23.
  const auto em = hn::ShiftLeft<13>(hn::And(h, hn::Set(du, 0x7fffu)));
  const auto exp = hn::And(em, hn::Set(du, 0x0f800000u));
  const auto rebias = hn::Set(du, 112u << 23);
  auto o = hn::Add(em, rebias);
  // Inf/NaN: exponent 31 must become 255, a further +112; the payload stays as it is.
  o = hn::IfThenElse(hn::Eq(exp, hn::Set(du, 0x0f800000u)), hn::Add(o, rebias), o);
  // Zero/subnormal m·2^-24: build 2^-14·(1 + m/1024) and subtract 2^-14, exact in f32.
  const auto sub = hn::BitCast(
      du, hn::Sub(hn::BitCast(df, hn::Add(o, hn::Set(du, 1u << 23))), hn::Set(df, 0x1p-14f)));
  o = hn::IfThenElse(hn::Eq(exp, hn::Zero(du)), sub, o);
  return hn::BitCast(df, hn::Or(o, sign));
}

HWY_INLINE V16 FloatToHalf(VF f) {
  const DF df;
  const DU du;
  const DI di;
  const D16 d16;
  const auto x = hn::BitCast(du, f);
  const auto absx = hn::And(x, hn::Set(du, 0x7fffffffu));
  const auto sabs = hn::BitCast(di, absx);  // < 2^31, so signed compares are safe
  const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0x8000u));
  // Normal range: rebias and round to nearest even on the 13 dropped mantissa bits.
  auto r = hn::Sub(absx, hn::Set(du, 0x38000000u));
  r = hn::Add(r, hn::Add(hn::Set(du, 0x0fffu), hn::And(hn::ShiftRight<13>(r), hn::Set(du, 1u))));
  r = hn::ShiftRight<13>(r);
  // Below the smallest normal half: 0.5 + |x| rounds |x| to a multiple of 2^-24 (the ulp of
  // 0.5) with the FPU's round-to-nearest-even; the low bits are then the half's mantissa.
  const auto magic = hn::Set(du, 126u << 23);
  const auto sub =
      hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, absx), hn::BitCast(df, magic))), magic);
  r = hn::IfThenElse(hn::RebindMask(du, hn::Lt(sabs, hn::Set(di, 0x38800000))), sub, r);
  r = hn::IfThenElse(hn::RebindMask(du, hn::Gt(sabs, hn::Set(di, 0x477fefff))),
                     hn::Set(du, 0x7c00u), r);  // >= 65520 rounds to inf
  r = hn::IfThenElse(hn::RebindMask(du, hn::Gt(sabs, hn::Set(di, 0x7f800000))),
                     hn::Set(du, 0x7e00u), r);  // NaN: canonical quiet NaN
  return hn::DemoteTo(d16, hn::BitCast(di, hn::Or(r, sign)));
}

#undef TARMAC_OPS_HW_F16  // re-included once per target
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define TARMAC_OPS_HW_F16 1
#else
#define TARMAC_OPS_HW_F16 0
#endif

HWY_INLINE VF HalfToFloatFast(V16 h16) {
#if TARMAC_OPS_HW_F16
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> df16;
  const VF f = hn::PromoteTo(df, hn::BitCast(df16, h16));
  if (HWY_LIKELY(hn::AllFalse(df, hn::IsNaN(f)))) return f;
#endif
  return HalfToFloat(h16);
}

HWY_INLINE V16 FloatToHalfFast(VF f) {
#if TARMAC_OPS_HW_F16
  const DF df;
  const D16 d16;
  const hn::Rebind<hwy::float16_t, DF> df16;
  if (HWY_LIKELY(hn::AllFalse(df, hn::IsNaN(f)))) return hn::BitCast(d16, hn::DemoteTo(df16, f));
#endif
  return FloatToHalf(f);
}

HWY_INLINE VF Bf16ToFloat(V16 h16) {
  const DF df;
  const DU du;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, h16)));
}

HWY_INLINE V16 FloatToBf16(VF f) {
  const DU du;
  const DI di;
  const D16 d16;
  const auto u = hn::BitCast(du, f);
  const auto is_nan =
      hn::Gt(hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu))), hn::Set(di, 0x7f800000));
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), lsb)));
  const auto quiet = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
  const auto r = hn::IfThenElse(hn::RebindMask(du, is_nan), quiet, rounded);
  return hn::DemoteTo(d16, hn::BitCast(di, r));
}

template <class F>
HWY_INLINE void Widen(const uint16_t* HWY_RESTRICT in, float* HWY_RESTRICT out, int64_t n, F f) {
  const DF df;
  const D16 d16;
  const size_t N = hn::Lanes(df);
  const size_t un = static_cast<size_t>(n);
  size_t i = 0;
  for (; i + N <= un; i += N) hn::StoreU(f(hn::LoadU(d16, in + i)), df, out + i);
  if (i < un) {
    HWY_ALIGN uint16_t bin[kMaxLanes] = {};
    HWY_ALIGN float bout[kMaxLanes];
    std::memcpy(bin, in + i, (un - i) * sizeof(uint16_t));
    hn::Store(f(hn::Load(d16, bin)), df, bout);
    std::memcpy(out + i, bout, (un - i) * sizeof(float));
  }
}

template <class F>
HWY_INLINE void Narrow(const float* HWY_RESTRICT in, uint16_t* HWY_RESTRICT out, int64_t n, F f) {
  const DF df;
  const D16 d16;
  const size_t N = hn::Lanes(df);
  const size_t un = static_cast<size_t>(n);
  size_t i = 0;
  for (; i + N <= un; i += N) hn::StoreU(f(hn::LoadU(df, in + i)), d16, out + i);
  if (i < un) {
    HWY_ALIGN float bin[kMaxLanes] = {};
    HWY_ALIGN uint16_t bout[kMaxLanes];
    std::memcpy(bin, in + i, (un - i) * sizeof(float));
    hn::Store(f(hn::Load(df, bin)), d16, bout);
    std::memcpy(out + i, bout, (un - i) * sizeof(uint16_t));
  }
}

void F16ToF32Impl(const uint16_t* in, float* out, int64_t n) { Widen(in, out, n, HalfToFloatFast); }
void F32ToF16Impl(const float* in, uint16_t* out, int64_t n) {
  Narrow(in, out, n, FloatToHalfFast);
}
void BF16ToF32Impl(const uint16_t* in, float* out, int64_t n) { Widen(in, out, n, Bf16ToFloat); }
void F32ToBF16Impl(const float* in, uint16_t* out, int64_t n) { Narrow(in, out, n, FloatToBf16); }

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {

HWY_EXPORT(F16ToF32Impl);
HWY_EXPORT(F32ToF16Impl);
HWY_EXPORT(BF16ToF32Impl);
HWY_EXPORT(F32ToBF16Impl);

void ConvertF16ToF32(const uint16_t* in, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(F16ToF32Impl)(in, out, n);
}
void ConvertF32ToF16(const float* in, uint16_t* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(F32ToF16Impl)(in, out, n);
}
void ConvertBF16ToF32(const uint16_t* in, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(BF16ToF32Impl)(in, out, n);
}
void ConvertF32ToBF16(const float* in, uint16_t* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(F32ToBF16Impl)(in, out, n);
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
