// Scalar IEEE half and bfloat16 conversions (round to nearest even, NaN and Inf preserved).
// These are the reference conversions; SIMD kernels convert with hardware instructions and
// are tested against these. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <cstring>

namespace tarmac {

float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

inline float BF16ToF32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t F32ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace tarmac
