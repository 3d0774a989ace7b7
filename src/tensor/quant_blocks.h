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
