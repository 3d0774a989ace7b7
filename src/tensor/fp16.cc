#include "tensor/fp16.h"

namespace tarmac {

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // overflow (>= 65520 rounds to inf) or inf
  if (absx < 0x38800000u) {                        // below the smallest normal half: subnormal
    if (absx < 0x33000000u) return sign;           // rounds to zero (< 2^-25)
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 + (112 - e) + 1 ... so that result is in units of 2^-24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0x0fffu + ((r >> 13) & 1u);  // round to nearest even on the 13 dropped bits
  return sign | static_cast<uint16_t>(r >> 13);
}

}  // namespace tarmac
