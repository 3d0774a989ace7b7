// The split every split-bf16 product of the AMX kernels uses (matmul_amx.cc, attention_amx.cc):
// f32 v -> hi = RNE(v), lo = RNE(v - hi), both bf16 (v - hi is exact in f32, so lo leaves at
// most 2^-16 of v).
//
// Include only from translation units whose callers check AmxBf16Available() first: the
// function is compiled for AVX512-BF16 and has internal linkage, so no caller on another CPU
// can be linked to it.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tarmac::kernels {
namespace {

// a (values 0-15) and b (16-31) -> 32 hi and 32 lo bf16 at hi[0..32) and lo[0..32).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16"))) inline void SplitBf16x32(
    __m512 a, __m512 b, uint16_t* hi, uint16_t* lo) {
  const __m512bh h = _mm512_cvtne2ps_pbh(b, a);  // low 16 lanes from a
  const __m512i hi_i = reinterpret_cast<const __m512i&>(h);
  const __m512 ha = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi_i)), 16));
  const __m512 hb = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hi_i, 1)), 16));
  const __m512bh l = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha));
  _mm512_storeu_si512(hi, hi_i);
  _mm512_storeu_si512(lo, reinterpret_cast<const __m512i&>(l));
}

}  // namespace
}  // namespace tarmac::kernels
