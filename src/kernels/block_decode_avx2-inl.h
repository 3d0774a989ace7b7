// AVX2 decoders of GGUF weight blocks into signed int8 weights and float scales, for
// MatVecBlocks (matvec_blocks.h). A unit is 256 weights: one super-block of the K, IQ4_XS and
// ternary types, or 8 blocks of 32 of the others (fewer at a row's end). Decoding gives
//   value[e] = s[e / 16] · w[e] + o[e / 16],  w[e] an int8 with |w| <= 127,
// the products exact in f32 where the reference's are (the scales are the reference decode's
// own products). Internal to the kernels module; include only from a .cc that calls these in
// functions compiled for AVX2 (TARMAC_BLOCKS_TARGET_AVX2).
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TARMAC_BLOCKS_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TARMAC_BLOCKS_INLINE TARMAC_BLOCKS_TARGET_AVX2 __attribute__((always_inline)) inline

namespace tarmac::kernels::blocks_internal {

// One decoded unit: chunk c (32 weights) in w[c]; the scale and offset of each 16-weight
// group. offsets: whether any o is non-zero (the affine types).
struct Unit {
  __m256i w[8];
  alignas(32) float s[16];
  alignas(32) float o[16];
  int chunks = 8;
  bool offsets = false;
};

TARMAC_BLOCKS_INLINE __m256i Nibbles(const uint8_t* qs16) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs16));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

// 0x10 in byte j where bit j of bits is set.
TARMAC_BLOCKS_INLINE __m256i BitsToByte16(uint32_t bits) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                        2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bm = _mm256_set1_epi64x(0x8040201008040201LL);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bm), bm);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

TARMAC_BLOCKS_INLINE __m256i Lookup16(const int8_t* table, __m256i idx) {
  const __m256i t =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
  return _mm256_shuffle_epi8(t, idx);
}

TARMAC_BLOCKS_INLINE void SetScale(Unit* u, int c, float s, float o) {
  u->s[2 * c] = u->s[2 * c + 1] = s;
  u->o[2 * c] = u->o[2 * c + 1] = o;
}

// The 2-bit plane k of 32 bytes: bits 2k of each byte.
TARMAC_BLOCKS_INLINE __m256i Plane2(__m256i q, int k) {
  return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
}

// Bit c of each of 32 bytes, as 1.
TARMAC_BLOCKS_INLINE __m256i Bit(__m256i q, int c) {
  return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(c)), _mm256_set1_epi8(1));
}

// --- 32-element block types: unit = up to 8 blocks starting at block i0. --------------------

template <DType kT>
TARMAC_BLOCKS_INLINE void DecodeSmall(const uint8_t* row, int64_t i0, int n, Unit* u) {
  u->chunks = n;
  u->offsets = kT == DType::kQ4_1 || kT == DType::kQ5_1;
  for (int c = 0; c < n; ++c) {
    if constexpr (kT == DType::kQ4_1) {
      const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[i0 + c];
      u->w[c] = Nibbles(b.qs);
      SetScale(u, c, F16ToF32(b.d), F16ToF32(b.m));
    } else if constexpr (kT == DType::kQ5_0 || kT == DType::kQ5_1) {
      using B = std::conditional_t<kT == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
      const auto& b = reinterpret_cast<const B*>(row)[i0 + c];
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      const __m256i q = _mm256_or_si256(Nibbles(b.qs), BitsToByte16(qh));
      if constexpr (kT == DType::kQ5_0) {
        u->w[c] = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        SetScale(u, c, F16ToF32(b.d), 0.0f);
      } else {
        u->w[c] = q;
        SetScale(u, c, F16ToF32(b.d), F16ToF32(b.m));
      }
    } else if constexpr (kT == DType::kIQ4_NL) {
      const auto& b = reinterpret_cast<const BlockIQ4_NL*>(row)[i0 + c];
      u->w[c] = Lookup16(kIq4nlValues, Nibbles(b.qs));
      SetScale(u, c, F16ToF32(b.d), 0.0f);
    } else {
      static_assert(kT == DType::kMXFP4);
      const auto& b = reinterpret_cast<const BlockMXFP4*>(row)[i0 + c];
      u->w[c] = Lookup16(kMxfp4Values, Nibbles(b.qs));
      SetScale(u, c, E8M0HalfToF32(b.e), 0.0f);
    }
  }
}

// --- super-block types: unit = super-block i. ------------------------------------------------

TARMAC_BLOCKS_INLINE void DecodeQ5K(const BlockQ5_K& b, Unit* u) {
  u->offsets = true;
  const float d = F16ToF32(b.d), dmin = F16ToF32(b.dmin);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    Q4KScaleMin(j, b.scales, &sc, &m);
    SetScale(u, j, d * sc, -(dmin * m));
  }
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int p = 0; p < 4; ++p) {
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
    u->w[2 * p] = _mm256_or_si256(_mm256_and_si256(ql, m4), _mm256_slli_epi16(Bit(qh, 2 * p), 4));
    u->w[2 * p + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), m4),
                                      _mm256_slli_epi16(Bit(qh, 2 * p + 1), 4));
  }
}

TARMAC_BLOCKS_INLINE void DecodeQ3K(const BlockQ3_K& b, Unit* u) {
  u->offsets = false;
  const float d = F16ToF32(b.d);
  uint8_t sc[16];
  Q3KScales(b.scales, sc);
  for (int g = 0; g < 16; ++g) u->s[g] = d * (sc[g] - 32), u->o[g] = 0.0f;
  const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
  for (int h = 0; h < 2; ++h) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
    for (int k = 0; k < 4; ++k) {
      const int c = 4 * h + k;
      const __m256i v = _mm256_or_si256(Plane2(q, k), _mm256_slli_epi16(Bit(hm, c), 2));
      u->w[c] = _mm256_sub_epi8(v, _mm256_set1_epi8(4));
    }
  }
}

TARMAC_BLOCKS_INLINE void DecodeQ2K(const BlockQ2_K& b, Unit* u) {
  u->offsets = true;
  const float d = F16ToF32(b.d), dmin = F16ToF32(b.dmin);
  for (int g = 0; g < 16; ++g) {
    u->s[g] = d * (b.scales[g] & 0xF);
    u->o[g] = -(dmin * (b.scales[g] >> 4));
  }
  for (int h = 0; h < 2; ++h) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
    for (int k = 0; k < 4; ++k) u->w[4 * h + k] = Plane2(q, k);
  }
}

TARMAC_BLOCKS_INLINE void DecodeIQ4XS(const BlockIQ4_XS& b, Unit* u) {
  u->offsets = false;
  const float d = F16ToF32(b.d);
  for (int j = 0; j < 8; ++j) {
    const int ls = ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
    SetScale(u, j, d * (ls - 32), 0.0f);
    u->w[j] = Lookup16(kIq4nlValues, Nibbles(b.qs + 16 * j));
  }
}

TARMAC_BLOCKS_INLINE void DecodeTQ2(const BlockTQ2_0& b, Unit* u) {
  u->offsets = false;
  const float d = F16ToF32(b.d);
  for (int g = 0; g < 16; ++g) u->s[g] = d, u->o[g] = 0.0f;
  for (int h = 0; h < 2; ++h) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
    for (int k = 0; k < 4; ++k) u->w[4 * h + k] = _mm256_sub_epi8(Plane2(q, k), _mm256_set1_epi8(1));
  }
}

// Trit n (0 = most significant) of a TQ1_0 byte, as quant_ref.cc decodes it.
inline int TQ1Trit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto q = static_cast<uint8_t>(byte * kPow3[n]);
  return (static_cast<uint16_t>(q) * 3) >> 8;
}

TARMAC_BLOCKS_INLINE void DecodeTQ1(const BlockTQ1_0& b, Unit* u) {
  u->offsets = false;
  const float d = F16ToF32(b.d);
  for (int g = 0; g < 16; ++g) u->s[g] = d, u->o[g] = 0.0f;
  alignas(32) int8_t w[256];
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) w[32 * n + m] = static_cast<int8_t>(TQ1Trit(b.qs[m], n) - 1);
    for (int m = 0; m < 16; ++m) w[160 + 16 * n + m] = static_cast<int8_t>(TQ1Trit(b.qs[32 + m], n) - 1);
  }
  for (int n = 0; n < 4; ++n) {
    for (int j = 0; j < 4; ++j) w[240 + 4 * n + j] = static_cast<int8_t>(TQ1Trit(b.qh[j], n) - 1);
  }
  for (int c = 0; c < 8; ++c) u->w[c] = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 32 * c));
}

}  // namespace tarmac::kernels::blocks_internal
#endif
