// The fixed tables of the GGUF grid ("codebook") quantization types, as llama.cpp's readers use
// them (ggml-common.h): facts of the file format, so both sides of a GGUF file agree on them.
//
// Grid entries pack one small vector per integer, element j in byte j (little-endian order):
//   kIq2xxsGrid  IQ2_XXS: 256 vectors of 8 magnitudes, each byte one of 0x08, 0x19, 0x2b.
//   kIq2xsGrid   IQ2_XS:  512 vectors of 8, same byte values.
//   kIq2sGrid    IQ2_S:   1024 vectors of 8, same byte values.
//   kIq3xxsGrid  IQ3_XXS: 256 vectors of 4 magnitudes, bytes 0x04, 0x0c, ..., 0x34 and 0x3e.
//   kIq3sGrid    IQ3_S:   512 vectors of 4 magnitudes, odd bytes 1..15.
//   kIq1sGrid    IQ1_S and IQ1_M: 2048 vectors of 8 signed values, bytes read as int8 -1, 0, +1.
// Sign tables (IQ2_XXS, IQ2_XS, IQ3_XXS store 7 sign bits per 8 values):
//   kKsignsIq2xs[s] = s with bit 7 set when s has an odd number of bits, so the 8 signs always
//                     have even parity and the eighth is implied; a set bit j negates value j.
//   kKmaskIq2xs[j]  = 1 << j, the bit of value j in a sign byte.
// The IQ1 types add a shift of +-kIq1Delta to every grid value of a group before scaling.
//
// Constant data, thread-safe. Preconditions: indices within each table's size.
#pragma once

#include <cstdint>

namespace tarmac::quant_grid {

extern const uint64_t kIq2xxsGrid[256];
extern const uint64_t kIq2xsGrid[512];
extern const uint64_t kIq2sGrid[1024];
extern const uint32_t kIq3xxsGrid[256];
extern const uint32_t kIq3sGrid[512];
extern const uint64_t kIq1sGrid[2048];
extern const uint8_t kKsignsIq2xs[128];
extern const uint8_t kKmaskIq2xs[8];

// IQ1S_DELTA and IQ1M_DELTA of ggml-common.h (the same value).
inline constexpr float kIq1Delta = 0.125f;

// Byte j (0-based) of a grid entry: the magnitude (or, for kIq1sGrid, the int8 value) of
// element j of that vector.
inline uint8_t GridByte(uint64_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }

}  // namespace tarmac::quant_grid
