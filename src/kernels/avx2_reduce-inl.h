// The sum of a ymm's 8 floats, shared by the AVX2 decode kernels (matvec_q6k, matvec_blocks).
// Internal to the kernels module; include only from a .cc that calls it in functions compiled
// for AVX2. Pure.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

namespace tarmac::kernels {

__attribute__((target("avx2,fma,f16c"), always_inline)) inline float HorizontalSumAvx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace tarmac::kernels
#endif
