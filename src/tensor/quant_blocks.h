// Block layouts of the quantized types, byte-for-byte as in GGUF files (llama.cpp's layouts).
// All multi-byte fields are little-endian; `d`/`dmin` are IEEE half unless noted.
#pragma once

#include <cstdint>

namespace tarmac {

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;
inline constexpr int kQK_K = 256;  // super-block size of the K-quants

// value[j] = d * qs[j]
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// value[j] = d * ((qs[j] & 15) - 8), value[j + 16] = d * ((qs[j] >> 4) - 8), j < 16
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// 8 sub-blocks of 32; each has a 6-bit scale and 6-bit min packed in `scales` (12 bytes).
// Sub-block pair (2i, 2i+1) uses bytes qs[32i .. 32i+31]: low nibbles for 2i, high for 2i+1.
// value = d * sc * q - dmin * m.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// 16 sub-blocks of 16; 6-bit quants (low 4 bits in ql, high 2 in qh), int8 scales.
// value = d * scales[sub] * (q - 32).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Activation format for K-quant dot products: float scale, int8 quants, and sums of each
// group of 16 quants (bsums) so the mins of Q4_K fold in without a second pass.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// value[j] = d * (qs[j] & 15) + m, value[j + 16] = d * (qs[j] >> 4) + m, j < 16
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// 5-bit quants: the low 4 bits as in Q4_0, bit 4 of element j in bit j of the little-endian
// u32 qh. value = d * (q - 16).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// As Q5_0 with an offset: value = d * q + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// 16 sub-blocks of 16, 2-bit quants. scales[s]: low nibble the scale, high nibble the min of
// sub-block s (both 4-bit multiples of d / dmin). In each half h of 128 elements, the 32 bytes
// qs[32h ..] hold four 2-bit planes: plane k (bits 2k) is elements 128h + 32k + l (l < 32),
// byte l. value = d * sc * q - dmin * m.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16, 3-bit quants: the low 2 bits laid out as Q2_K's, the high bit of
// element 32k + l in bit k of hmask[l] (l < 32, k < 8). Clear high bit means -4. 6-bit scales
// packed in 12 bytes (Q3KScales unpacks them), offset by 32. value = d * (sc - 32) * q,
// q in [-4, 3].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K with a fifth bit: element 64p + l of sub-block pair p has its high bit in bit 2p of
// qh[l], element 64p + 32 + l in bit 2p + 1 (l < 32). value = d * sc * q - dmin * m, q < 32.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// The 16 levels of IQ4_NL and IQ4_XS (a non-uniform grid, denser near 0).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// value[j] = d * kIq4nlValues[qs[j] & 15], value[j + 16] = ...[qs[j] >> 4], j < 16
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// 8 sub-blocks of 32 laid out as IQ4_NL's, each with a 6-bit scale ls (low 4 bits in nibble
// s % 2 of scales_l[s / 2], high 2 bits at bits 2s of scales_h). value = d * (ls - 32) * v.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The FP4 (E2M1) levels of MXFP4, doubled so they are integers; the block scale is halved to
// match (E8M0HalfToF32).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// value[j] = E8M0HalfToF32(e) * kMxfp4Values[qs[j] & 15], value[j + 16] with qs[j] >> 4.
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17);

// 2^(e - 128): half the E8M0 scale 2^(e - 127), exact (subnormal for e < 2).
inline float E8M0HalfToF32(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Ternary, 1.6875 bits: qs[0..32) hold 5 trits each for elements 32n + m (n < 5, most
// significant trit first), qs[32..48) 5 trits for 160 + 16n + m, qh[0..4) 4 trits for
// 240 + 4n + j. A byte b holds the trits t0..t4 as ceil((sum t_i 3^(4-i)) * 256 / 243); trit n
// is ((uint8)(b * 3^n) * 3) >> 8. value = d * (t - 1).
// Trit n (0 = most significant, n < 5) of a TQ1_0 byte, 0..2.
inline int TQ1Trit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto q = static_cast<uint8_t>(byte * kPow3[n]);
  return (static_cast<uint16_t>(q) * 3) >> 8;
}

struct BlockTQ1_0 {
  uint8_t qs[48];
  uint8_t qh[4];
  uint16_t d;
};
static_assert(sizeof(BlockTQ1_0) == 54);

// Ternary in 2 bits: element 128h + 32l + m (h < 2, l < 4, m < 32) is bits 2l of qs[32h + m].
// value = d * (q - 1).
struct BlockTQ2_0 {
  uint8_t qs[kQK_K / 4];
  uint16_t d;
};
static_assert(sizeof(BlockTQ2_0) == 66);

// The 16 6-bit scales of a Q3_K block (0..63; subtract 32 for the signed scale). Bytes 0..7
// hold the low nibbles (sub-blocks 0..7 low nibbles, 8..15 high nibbles); bytes 8..11 the top
// two bits, sub-block s at bits 2 * (s / 4) of byte 8 + s % 4.
inline void Q3KScales(const uint8_t* scales, uint8_t* out) {
  for (int s = 0; s < 16; ++s) {
    const int lo = s < 8 ? scales[s] & 0xF : scales[s - 8] >> 4;
    const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    out[s] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Inverse of Q3KScales. Preconditions: every in[s] < 64.
inline void PackQ3KScales(const uint8_t* in, uint8_t* scales) {
  for (int j = 0; j < 12; ++j) scales[j] = 0;
  for (int s = 0; s < 16; ++s) {
    if (s < 8) {
      scales[s] |= in[s] & 0xF;
    } else {
      scales[s - 8] |= static_cast<uint8_t>((in[s] & 0xF) << 4);
    }
    scales[8 + s % 4] |= static_cast<uint8_t>((in[s] >> 4) << (2 * (s / 4)));
  }
}

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K block.
inline void Q4KScaleMin(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// The 6-bit weight of element e (0..255) of a Q6_K block as u = w + 32 (0..63): in each
// 128-element half h, l = e % 32 and k = (e % 128) / 32 pick the nibble of
// ql[64h + 32·(k % 2) + l] (low for k < 2) and the two bits 2k of qh[32h + l].
inline int Q6KQuant(const BlockQ6_K& b, int e) {
  const int h = e / 128, k = (e % 128) / 32, l = e % 32;
  const uint8_t lo = b.ql[64 * h + 32 * (k % 2) + l];
  const int nib = k < 2 ? lo & 0xf : lo >> 4;
  return nib | (((b.qh[32 * h + l] >> (2 * k)) & 3) << 4);
}

// Packs 6-bit scales sc[0..8) and mins m[0..8) into the 12-byte `scales` field: the exact
// inverse of Q4KScaleMin. Bytes 0..3 hold sc[0..3] and bytes 4..7 m[0..3] in their low 6 bits;
// sub-blocks 4..7 keep their low nibbles in bytes 8..11 (scale low, min high) and lend their top
// two bits to the free top bits of bytes 0..3 (scales) and 4..7 (mins).
// Preconditions: every sc[j], m[j] < 64.
inline void PackQ4KScaleMin(const uint8_t* sc, const uint8_t* m, uint8_t* scales) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

}  // namespace tarmac
