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

// An f16 as f32 (F16C: exact, as F16ToF32, without the call).
TARMAC_BLOCKS_INLINE float Half(uint16_t h) { return _cvtsh_ss(h); }

// s[g] = d · sc[g] for the 16 groups, sc[g] (bytes of v) small signed integers (the
// reference's d * int products). In registers: scales assembled with byte stores and read
// back as a vector stall on store forwarding.
TARMAC_BLOCKS_INLINE void ScalesTimes(float d, __m128i v, float* s) {
  const __m256 vd = _mm256_set1_ps(d);
  _mm256_store_ps(s, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))));
  _mm256_store_ps(s + 8, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))));
}

TARMAC_BLOCKS_INLINE void Zero16(float* o) {
  _mm256_store_ps(o, _mm256_setzero_ps());
  _mm256_store_ps(o + 8, _mm256_setzero_ps());
}

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

// Block i of a row of a 32-element type: its weights w, scale s and offset o (0 for the
// symmetric types).
template <DType kT>
TARMAC_BLOCKS_INLINE void DecodeBlock32(const uint8_t* row, int64_t i, __m256i* w, float* s, float* o) {
  if constexpr (kT == DType::kQ4_1) {
    const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[i];
    *w = Nibbles(b.qs);
    *s = Half(b.d);
    *o = Half(b.m);
  } else if constexpr (kT == DType::kQ5_0 || kT == DType::kQ5_1) {
    using B = std::conditional_t<kT == DType::kQ5_0, BlockQ5_0, BlockQ5_1>;
    const auto& b = reinterpret_cast<const B*>(row)[i];
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    const __m256i q = _mm256_or_si256(Nibbles(b.qs), BitsToByte16(qh));
    *s = Half(b.d);
    if constexpr (kT == DType::kQ5_0) {
      *w = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
      *o = 0.0f;
    } else {
      *w = q;
      *o = Half(b.m);
    }
  } else if constexpr (kT == DType::kIQ4_NL) {
    const auto& b = reinterpret_cast<const BlockIQ4_NL*>(row)[i];
    *w = Lookup16(kIq4nlValues, Nibbles(b.qs));
    *s = Half(b.d);
    *o = 0.0f;
  } else {
    static_assert(kT == DType::kMXFP4);
    const auto& b = reinterpret_cast<const BlockMXFP4*>(row)[i];
    *w = Lookup16(kMxfp4Values, Nibbles(b.qs));
    *s = E8M0HalfToF32(b.e);
    *o = 0.0f;
  }
}

template <DType kT>
TARMAC_BLOCKS_INLINE void DecodeSmall(const uint8_t* row, int64_t i0, int n, Unit* u) {
  u->chunks = n;
  u->offsets = kT == DType::kQ4_1 || kT == DType::kQ5_1;
  // Groups past a short unit's end are read (and ignored) by whole-vector code: define them.
  Zero16(u->s);
  Zero16(u->o);
  for (int c = 0; c < 8; ++c) {
    if (c >= n) break;
    float s, o;
    DecodeBlock32<kT>(row, i0 + c, &u->w[c], &s, &o);
    SetScale(u, c, s, o);
  }
}

// --- super-block types: unit = super-block i. ------------------------------------------------

// A K-type super-block in integer form: value = d · sc[g] · w - dmin · m[g] for a weight w of
// group g (16 weights each); sc[g] and m[g] are byte g of sc / m (signed; m is zero and mins
// false for the types without mins). The float Unit (ToUnit) and MatVecBlocks' integer pass
// for these types both start from it.
struct KScales {
  float d = 0.0f, dmin = 0.0f;
  __m128i sc, m;
  bool mins = false;
};

// Whether a kKInts type's integer weights are never negative (vpmaddubsw takes them as they
// are, without the sign trick).
template <DType kT>
constexpr bool kUnsignedInts = kT == DType::kQ2_K || kT == DType::kQ3_K || kT == DType::kQ5_K;

TARMAC_BLOCKS_INLINE KScales Q5KInts(const BlockQ5_K& b, __m256i* w) {
  KScales k;
  k.d = Half(b.d);
  k.dmin = Half(b.dmin);
  k.mins = true;
  // The 8 6-bit scales and mins as Q4KScaleMin unpacks them, in two 64-bit words, each
  // duplicated over its sub-block's two groups of 16. In registers: scales assembled with
  // byte stores and read back as a vector stall on store forwarding.
  uint32_t a[3];
  std::memcpy(a, b.scales, 12);
  const uint32_t lo6 = 0x3f3f3f3f, lo4 = 0x0f0f0f0f, hi2 = 0x03030303;
  const uint32_t sc_lo = a[0] & lo6, m_lo = a[1] & lo6;
  const uint32_t sc_hi = (a[2] & lo4) | (((a[0] >> 6) & hi2) << 4);
  const uint32_t m_hi = ((a[2] >> 4) & lo4) | (((a[1] >> 6) & hi2) << 4);
  const __m128i sc = _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi), 0, 0);
  const __m128i m = _mm_setr_epi32(static_cast<int>(m_lo), static_cast<int>(m_hi), 0, 0);
  k.sc = _mm_unpacklo_epi8(sc, sc);
  k.m = _mm_unpacklo_epi8(m, m);
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  for (int p = 0; p < 4; ++p) {
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * p));
    w[2 * p] = _mm256_or_si256(_mm256_and_si256(ql, m4), _mm256_slli_epi16(Bit(qh, 2 * p), 4));
    w[2 * p + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), m4),
                                   _mm256_slli_epi16(Bit(qh, 2 * p + 1), 4));
  }
  return k;
}

// Weights as u = q + 4 in 0..7 (unsigned), the -4 folded into mins: m = 4 · sc under dmin = d,
// since sc · (u - 4) = sc · u - 4 · sc.
TARMAC_BLOCKS_INLINE KScales Q3KInts(const BlockQ3_K& b, __m256i* w) {
  KScales k;
  k.d = Half(b.d);
  k.dmin = k.d;
  k.mins = true;
  // The 16 6-bit scales as Q3KScales unpacks them, four per 32-bit word: low nibbles from
  // bytes 0..7, top two bits from bytes 8..11.
  uint32_t a[3];
  std::memcpy(a, b.scales, 12);
  const uint32_t lo4 = 0x0f0f0f0f, hi2 = 0x03030303;
  const __m128i sc = _mm_setr_epi32(static_cast<int>((a[0] & lo4) | ((a[2] & hi2) << 4)),
                                    static_cast<int>((a[1] & lo4) | (((a[2] >> 2) & hi2) << 4)),
                                    static_cast<int>(((a[0] >> 4) & lo4) | (((a[2] >> 4) & hi2) << 4)),
                                    static_cast<int>(((a[1] >> 4) & lo4) | (((a[2] >> 6) & hi2) << 4)));
  k.sc = _mm_sub_epi8(sc, _mm_set1_epi8(32));
  const __m128i twice = _mm_add_epi8(k.sc, k.sc);
  k.m = _mm_add_epi8(twice, twice);  // 4 · sc, in [-128, 124]: no byte overflows
  const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask));
  for (int h = 0; h < 2; ++h) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
    for (int j = 0; j < 4; ++j) {
      const int c = 4 * h + j;
      w[c] = _mm256_or_si256(Plane2(q, j), _mm256_slli_epi16(Bit(hm, c), 2));
    }
  }
  return k;
}

TARMAC_BLOCKS_INLINE KScales Q2KInts(const BlockQ2_K& b, __m256i* w) {
  KScales k;
  k.d = Half(b.d);
  k.dmin = Half(b.dmin);
  k.mins = true;
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  k.sc = _mm_and_si128(raw, m4);
  k.m = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
  for (int h = 0; h < 2; ++h) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
    for (int j = 0; j < 4; ++j) w[4 * h + j] = Plane2(q, j);
  }
  return k;
}

TARMAC_BLOCKS_INLINE KScales IQ4XSInts(const BlockIQ4_XS& b, __m256i* w) {
  KScales k;
  k.d = Half(b.d);
  uint64_t packed = 0;  // ls - 32 per sub-block, a byte each
  for (int j = 0; j < 8; ++j) {
    const int ls = ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
    packed |= static_cast<uint64_t>(static_cast<uint8_t>(ls - 32)) << (8 * j);
    w[j] = Lookup16(kIq4nlValues, Nibbles(b.qs + 16 * j));
  }
  const __m128i ls = _mm_cvtsi64_si128(static_cast<int64_t>(packed));
  k.sc = _mm_unpacklo_epi8(ls, ls);
  k.m = _mm_setzero_si128();
  return k;
}

// The float form of a KScales: s = d · sc (the reference's product), o = -(dmin · m).
TARMAC_BLOCKS_INLINE void ToUnit(const KScales& k, Unit* u) {
  u->offsets = k.mins;
  ScalesTimes(k.d, k.sc, u->s);
  if (k.mins) {
    ScalesTimes(k.dmin, k.m, u->o);
    const __m256 sign = _mm256_set1_ps(-0.0f);  // negation is exact
    _mm256_store_ps(u->o, _mm256_xor_ps(_mm256_load_ps(u->o), sign));
    _mm256_store_ps(u->o + 8, _mm256_xor_ps(_mm256_load_ps(u->o + 8), sign));
  } else {
    Zero16(u->o);
  }
}

TARMAC_BLOCKS_INLINE void DecodeQ5K(const BlockQ5_K& b, Unit* u) { ToUnit(Q5KInts(b, u->w), u); }
// The float form keeps the reference's d · (sc - 32) · q (q = u - 4 signed), no offsets.
TARMAC_BLOCKS_INLINE void DecodeQ3K(const BlockQ3_K& b, Unit* u) {
  KScales k = Q3KInts(b, u->w);
  for (int c = 0; c < 8; ++c) u->w[c] = _mm256_sub_epi8(u->w[c], _mm256_set1_epi8(4));
  k.mins = false;
  ToUnit(k, u);
}
TARMAC_BLOCKS_INLINE void DecodeQ2K(const BlockQ2_K& b, Unit* u) { ToUnit(Q2KInts(b, u->w), u); }
TARMAC_BLOCKS_INLINE void DecodeIQ4XS(const BlockIQ4_XS& b, Unit* u) { ToUnit(IQ4XSInts(b, u->w), u); }

TARMAC_BLOCKS_INLINE void DecodeTQ2(const BlockTQ2_0& b, Unit* u) {
  u->offsets = false;
  const float d = Half(b.d);
  _mm256_store_ps(u->s, _mm256_set1_ps(d));
  _mm256_store_ps(u->s + 8, _mm256_set1_ps(d));
  Zero16(u->o);
  for (int h = 0; h < 2; ++h) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
    for (int k = 0; k < 4; ++k) u->w[4 * h + k] = _mm256_sub_epi8(Plane2(q, k), _mm256_set1_epi8(1));
  }
}

TARMAC_BLOCKS_INLINE void DecodeTQ1(const BlockTQ1_0& b, Unit* u) {
  u->offsets = false;
  const float d = Half(b.d);
  _mm256_store_ps(u->s, _mm256_set1_ps(d));
  _mm256_store_ps(u->s + 8, _mm256_set1_ps(d));
  Zero16(u->o);
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
