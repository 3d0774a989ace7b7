// AVX2 decoders of the IQ grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M)
// into a blocks_internal::Unit (block_decode_avx2-inl.h): per chunk of 32 weights the grid
// entries are gathered by index into a ymm, and each weight's sign bit becomes a byte mask
// that negates it (w = (g ^ m) - m). IQ1 values d·(g + delta), g in {-1, 0, 1}, delta = +-1/8,
// become s = d / 8 (exact) times the integer 8g +- 1. Internal to the kernels module; include
// only from a .cc that calls these in functions compiled for AVX2.
#pragma once

#include "kernels/block_decode_avx2-inl.h"
#include "tensor/quant_grid_blocks.h"
#include "tensor/quant_grid_tables.h"

#if defined(TARMAC_BLOCKS_TARGET_AVX2)

namespace tarmac::kernels::blocks_internal {

namespace qg = quant_grid;

// 0xFF in byte j where bit j of bits is set (32 bits, one per weight of a chunk).
TARMAC_BLOCKS_INLINE __m256i SignMask(uint32_t bits) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                        2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bm = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bm), bm);
}

TARMAC_BLOCKS_INLINE __m256i Signed(__m256i g, uint32_t sign_bits) {
  const __m256i m = SignMask(sign_bits);
  return _mm256_sub_epi8(_mm256_xor_si256(g, m), m);
}

TARMAC_BLOCKS_INLINE __m256i Gather4(const uint64_t* grid, int i0, int i1, int i2, int i3) {
  return _mm256_set_epi64x(static_cast<int64_t>(grid[i3]), static_cast<int64_t>(grid[i2]),
                           static_cast<int64_t>(grid[i1]), static_cast<int64_t>(grid[i0]));
}

TARMAC_BLOCKS_INLINE __m256i Gather8(const uint32_t* grid, const int* idx) {
  return _mm256_setr_epi32(static_cast<int>(grid[idx[0]]), static_cast<int>(grid[idx[1]]),
                           static_cast<int>(grid[idx[2]]), static_cast<int>(grid[idx[3]]),
                           static_cast<int>(grid[idx[4]]), static_cast<int>(grid[idx[5]]),
                           static_cast<int>(grid[idx[6]]), static_cast<int>(grid[idx[7]]));
}

TARMAC_BLOCKS_INLINE void DecodeIQ2XXS(const qg::BlockIQ2_XXS& b, Unit* u) {
  u->offsets = false;
  const float d = Half(b.d);
  for (int c = 0; c < 8; ++c) {
    const uint16_t* q = b.qs + 4 * c;
    const uint32_t idx = q[0] | (static_cast<uint32_t>(q[1]) << 16);
    const uint32_t meta = q[2] | (static_cast<uint32_t>(q[3]) << 16);
    SetScale(u, c, d * (0.5f + (meta >> 28)) * 0.25f, 0.0f);
    uint32_t signs = 0;
    for (int g = 0; g < 4; ++g) signs |= uint32_t{qg::kKsignsIq2xs[(meta >> (7 * g)) & 127]} << (8 * g);
    u->w[c] = Signed(Gather4(qg::kIq2xxsGrid, idx & 255, (idx >> 8) & 255, (idx >> 16) & 255, idx >> 24),
                     signs);
  }
}

TARMAC_BLOCKS_INLINE void DecodeIQ2XS(const qg::BlockIQ2_XS& b, Unit* u) {
  u->offsets = false;
  const float d = Half(b.d);
  for (int c = 0; c < 8; ++c) {
    u->s[2 * c] = d * (0.5f + (b.scales[c] & 0xF)) * 0.25f;
    u->s[2 * c + 1] = d * (0.5f + (b.scales[c] >> 4)) * 0.25f;
    u->o[2 * c] = u->o[2 * c + 1] = 0.0f;
    const uint16_t* q = b.qs + 4 * c;
    uint32_t signs = 0;
    for (int g = 0; g < 4; ++g) signs |= uint32_t{qg::kKsignsIq2xs[q[g] >> 9]} << (8 * g);
    u->w[c] = Signed(Gather4(qg::kIq2xsGrid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511), signs);
  }
}

TARMAC_BLOCKS_INLINE void DecodeIQ2S(const qg::BlockIQ2_S& b, Unit* u) {
  u->offsets = false;
  const float d = Half(b.d);
  const uint8_t* sign_bytes = b.qs + 32;
  for (int c = 0; c < 8; ++c) {
    u->s[2 * c] = d * (0.5f + (b.scales[c] & 0xF)) * 0.25f;
    u->s[2 * c + 1] = d * (0.5f + (b.scales[c] >> 4)) * 0.25f;
    u->o[2 * c] = u->o[2 * c + 1] = 0.0f;
    int idx[4];
    for (int g = 0; g < 4; ++g) idx[g] = b.qs[4 * c + g] | (((b.qh[c] >> (2 * g)) & 3) << 8);
    uint32_t signs;
    std::memcpy(&signs, sign_bytes + 4 * c, 4);
    u->w[c] = Signed(Gather4(qg::kIq2sGrid, idx[0], idx[1], idx[2], idx[3]), signs);
  }
}

TARMAC_BLOCKS_INLINE void DecodeIQ3XXS(const qg::BlockIQ3_XXS& b, Unit* u) {
  u->offsets = false;
  const float d = Half(b.d);
  for (int c = 0; c < 8; ++c) {
    const uint8_t* q = b.qs + 8 * c;
    uint32_t meta;
    std::memcpy(&meta, b.qs + 64 + 4 * c, 4);
    SetScale(u, c, d * (0.5f + (meta >> 28)) * 0.5f, 0.0f);
    uint32_t signs = 0;
    for (int g = 0; g < 4; ++g) signs |= uint32_t{qg::kKsignsIq2xs[(meta >> (7 * g)) & 127]} << (8 * g);
    const int idx[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
    u->w[c] = Signed(Gather8(qg::kIq3xxsGrid, idx), signs);
  }
}

TARMAC_BLOCKS_INLINE void DecodeIQ3S(const qg::BlockIQ3_S& b, Unit* u) {
  u->offsets = false;
  const float d = Half(b.d);
  for (int c = 0; c < 8; ++c) {
    const int s = c % 2 == 0 ? b.scales[c / 2] & 0xF : b.scales[c / 2] >> 4;
    SetScale(u, c, d * (1 + 2 * s), 0.0f);
    const uint8_t* q = b.qs + 8 * c;
    const int qh = b.qh[c];
    int idx[8];
    for (int k = 0; k < 8; ++k) idx[k] = q[k] | (((qh >> k) & 1) << 8);
    uint32_t signs;
    std::memcpy(&signs, b.signs + 4 * c, 4);
    u->w[c] = Signed(Gather8(qg::kIq3sGrid, idx), signs);
  }
}

// 8g + 1 or 8g - 1 per group of 8 (delta_neg: bit k set for a negative delta in group k).
TARMAC_BLOCKS_INLINE __m256i Iq1Ints(__m256i g, int delta_neg) {
  const __m256i eight = _mm256_sign_epi8(_mm256_set1_epi8(8), g);
  const auto one = [delta_neg](int k) -> int64_t {
    return (delta_neg >> k) & 1 ? static_cast<int64_t>(0xFFFFFFFFFFFFFFFFULL)
                                : static_cast<int64_t>(0x0101010101010101ULL);
  };
  return _mm256_add_epi8(eight, _mm256_set_epi64x(one(3), one(2), one(1), one(0)));
}

TARMAC_BLOCKS_INLINE void DecodeIQ1S(const qg::BlockIQ1_S& b, Unit* u) {
  u->offsets = false;
  const float d = Half(b.d);
  for (int c = 0; c < 8; ++c) {
    const int qh = b.qh[c];
    SetScale(u, c, d * (2 * ((qh >> 12) & 7) + 1) * 0.125f, 0.0f);
    int idx[4];
    for (int g = 0; g < 4; ++g) idx[g] = b.qs[4 * c + g] | (((qh >> (3 * g)) & 7) << 8);
    u->w[c] = Iq1Ints(Gather4(qg::kIq1sGrid, idx[0], idx[1], idx[2], idx[3]),
                      (qh & 0x8000) != 0 ? 0xF : 0);
  }
}

TARMAC_BLOCKS_INLINE void DecodeIQ1M(const qg::BlockIQ1_M& b, Unit* u) {
  u->offsets = false;
  uint16_t sc[4];
  std::memcpy(sc, b.scales, 8);
  const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                               ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
  const float d = Half(dbits);
  for (int c = 0; c < 8; ++c) {
    const int shift = 6 * (c % 2);
    u->s[2 * c] = d * (2 * ((sc[c / 2] >> shift) & 7) + 1) * 0.125f;
    u->s[2 * c + 1] = d * (2 * ((sc[c / 2] >> (shift + 3)) & 7) + 1) * 0.125f;
    u->o[2 * c] = u->o[2 * c + 1] = 0.0f;
    int idx[4], neg = 0;
    for (int g = 0; g < 4; ++g) {
      const int grp = 4 * c + g;
      const int nib = (b.qh[grp / 2] >> (4 * (grp % 2))) & 0xF;
      idx[g] = b.qs[grp] | ((nib & 7) << 8);
      if (nib & 8) neg |= 1 << g;
    }
    u->w[c] = Iq1Ints(Gather4(qg::kIq1sGrid, idx[0], idx[1], idx[2], idx[3]), neg);
  }
}

}  // namespace tarmac::kernels::blocks_internal
#endif
