// Block layouts of the GGUF grid quantization types, byte for byte as llama.cpp stores them
// (ggml-common.h). Every block covers 256 weights (kQK_K). Multi-byte fields are little-endian;
// `d` is an IEEE half. The codebooks they index are in quant_grid_tables.h, and the decoders in
// quant_grid_dequant.cc are the executable statement of how the fields combine.
//
// "Group" below means 8 consecutive weights (4 for the IQ3 grid lookups); "sub-block" means 32.
// Plain data, no invariants beyond the field ranges noted; thread-safe to read.
#pragma once

#include <cstdint>

namespace tarmac::quant_grid {

inline constexpr int kBlockSize = 256;

// 2.0625 bits per weight.
// value = d * (0.5 + s) / 4 * grid[j] * sign[j], grid = kIq2xxsGrid.
struct BlockIQ2_XXS {
  uint16_t d;  // super-block scale (f16)
  // 8 sub-blocks x 4 uint16 = two little-endian uint32 per sub-block: the first holds the 4
  // groups' grid indices (byte g = index of group g, 0..255); the second holds 4 x 7 sign bits
  // (group g at bits 7g..7g+6, expanded by kKsignsIq2xs) and the sub-block scale s in bits 28..31.
  uint16_t qs[32];
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

// 2.3125 bits per weight.
// value = d * (0.5 + s) / 4 * grid[j] * sign[j], grid = kIq2xsGrid.
struct BlockIQ2_XS {
  uint16_t d;  // super-block scale (f16)
  // One per group (32): bits 0..8 grid index (0..511), bits 9..15 the 7 sign bits (kKsignsIq2xs).
  uint16_t qs[32];
  // One per sub-block: low nibble = scale s of its first 16 weights, high nibble of the last 16.
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ2_XS) == 74);

// 2.5625 bits per weight.
// value = d * (0.5 + s) / 4 * grid[j] * sign[j], grid = kIq2sGrid.
struct BlockIQ2_S {
  uint16_t d;  // super-block scale (f16)
  // Bytes 0..31: low 8 bits of each group's grid index (group g at byte g).
  // Bytes 32..63: each group's 8 sign bits, one byte per group (bit j negates weight j).
  uint8_t qs[64];
  // One per sub-block: bits 2l, 2l+1 are bits 8, 9 of the grid index of its group l (0..3).
  uint8_t qh[8];
  // One per sub-block: low nibble = scale s of its first 16 weights, high nibble of the last 16.
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ2_S) == 82);

// 3.0625 bits per weight.
// value = d * (0.5 + s) / 2 * grid[j] * sign[j], grid = kIq3xxsGrid (4 weights per index).
struct BlockIQ3_XXS {
  uint16_t d;  // super-block scale (f16)
  // Bytes 0..63: grid indices, 8 per sub-block, index k covering weights 4k..4k+3 of it.
  // Bytes 64..95: one little-endian uint32 per sub-block: 4 x 7 sign bits (group g at bits
  // 7g..7g+6, expanded by kKsignsIq2xs) and the sub-block scale s in bits 28..31.
  uint8_t qs[96];
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

// 3.4375 bits per weight.
// value = d * (1 + 2 s) * grid[j] * sign[j], grid = kIq3sGrid (4 weights per index).
struct BlockIQ3_S {
  uint16_t d;         // super-block scale (f16)
  uint8_t qs[64];     // low 8 bits of the grid indices, 8 per sub-block as in IQ3_XXS
  uint8_t qh[8];      // one per sub-block: bit k = bit 8 of its index k
  uint8_t signs[32];  // one byte per group of 8 weights: bit j negates weight j
  uint8_t scales[4];  // one per pair of sub-blocks: low nibble s of the first, high of the second
};
static_assert(sizeof(BlockIQ3_S) == 110);

// 1.5625 bits per weight.
// value = d * (2 s + 1) * (grid[j] + delta), grid = kIq1sGrid (int8 -1/0/+1),
// delta = -kIq1Delta when bit 15 of the sub-block's qh is set, else +kIq1Delta.
struct BlockIQ1_S {
  uint16_t d;      // super-block scale (f16)
  uint8_t qs[32];  // low 8 bits of each group's grid index (group g at byte g)
  // One per sub-block: bits 3g..3g+2 are bits 8..10 of the index of its group g, bits 12..14
  // the 3-bit scale s, bit 15 the sign of delta.
  uint16_t qh[8];
};
static_assert(sizeof(BlockIQ1_S) == 50);

// 1.75 bits per weight; no separate d field: its 16 bits are spread over the top nibbles of the
// four little-endian uint16 of `scales` (bits 0..3 of d in the first, 12..15 in the last).
// value = d * (2 s + 1) * (grid[j] + delta), grid = kIq1sGrid, s per 16 weights, delta per group.
struct BlockIQ1_M {
  uint8_t qs[32];  // low 8 bits of each group's grid index (group g at byte g)
  // One nibble per group (group g: byte g/2, low nibble for even g): bits 0..2 are bits 8..10 of
  // its grid index, bit 3 set means delta = -kIq1Delta.
  uint8_t qh[16];
  // Four little-endian uint16. Sub-block b uses uint16 b/2, bits 6(b%2)..+2 for the scale s of
  // its first 16 weights and the next 3 bits for its last 16; bits 12..15 carry a nibble of d.
  uint8_t scales[8];
};
static_assert(sizeof(BlockIQ1_M) == 56);

}  // namespace tarmac::quant_grid
