// The AVX2 unpacking of a Q6_K super-block's 6-bit weights, shared by MatVecQ6K (matvec_q6k.h)
// and MatMulQ6K (matmul_q6k.h). Internal to the kernels module; include only from a .cc that
// calls it in functions compiled for AVX2 (TARMAC_Q6K_TARGET_AVX2).
#pragma once

#include "tensor/quant_blocks.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TARMAC_Q6K_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace tarmac::kernels::q6k_internal {

// The 32-element chunks 4h .. 4h + 3 of super-block b as bytes u = w + 32 (0..63), each in
// element order: chunk k takes the low (k < 2) or high nibbles of ql[64h + 32·(k % 2) + l]
// and bits 2k..2k+1 of qh[32h + l] as bits 4..5 (the 16-bit shifts' carries across bytes are
// masked off). Preconditions: h is 0 or 1.
TARMAC_Q6K_TARGET_AVX2 __attribute__((always_inline)) inline void UnpackHalfAvx2(
    const BlockQ6_K& b, int h, __m256i (&u)[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
  const __m256i l2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
  const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
  u[0] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
  u[1] = _mm256_or_si256(_mm256_and_si256(l2, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
  u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(hb, m30));
  u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                         _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
}

}  // namespace tarmac::kernels::q6k_internal
#endif
