// Per-SIMD-target helper shared by the kernels: scalar IEEE half -> f32 with the hardware
// instruction where the target has it (F16C comes with every AVX2/AVX-512 target), else the
// reference conversion. Both are exact, so results never depend on the target.
// Included inside HWY_NAMESPACE by dequant.cc, matvec.cc (re-included once per target).
#if defined(TARMAC_KERNELS_HALF_SCALAR_INL_H_) == defined(HWY_TARGET_TOGGLE)
#undef TARMAC_HWY_HARDWARE_F16
#ifdef TARMAC_KERNELS_HALF_SCALAR_INL_H_
#undef TARMAC_KERNELS_HALF_SCALAR_INL_H_
#else
#define TARMAC_KERNELS_HALF_SCALAR_INL_H_
#endif

#include "hwy/highway.h"
#include "tensor/fp16.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {

// True where PromoteTo(f32, f16 vector) is the hardware conversion. Highway 1.0.3's emulated
// one (EMU128) maps f16 Inf/NaN to finite values, so those targets convert f16 rows
// element by element instead.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define TARMAC_HWY_HARDWARE_F16 1
#else
#define TARMAC_HWY_HARDWARE_F16 0
#endif

HWY_INLINE float HalfToF32(uint16_t h) {
#if TARMAC_HWY_HARDWARE_F16
  return _cvtsh_ss(h);
#else
  return F16ToF32(h);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
