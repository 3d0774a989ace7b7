// Scalar decoders of the grid quantization types (quant_grid_types.h): the reference that the
// kernels are tested against. Each value is formed with the same float operations, in the same
// order, as llama.cpp's dequantize_row_* (ggml-quants.c), so both produce identical bits: the
// sub-block scale as d * (offset + s) [* factor], then scale * grid byte, then the sign as a
// multiplication by +-1 (IQ1: scale * (grid value + delta)).
//
// Pure functions, thread-safe. Preconditions: x holds nb blocks of the type, y room for nb*256.
#include <cstdint>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant_grid_blocks.h"
#include "tensor/quant_grid_tables.h"
#include "tensor/quant_grid_types.h"

namespace tarmac::quant_grid {
namespace {

// 8 values of one grid vector under scale db; bit j of `signs` negates value j.
inline void Emit8(float db, uint64_t entry, uint8_t signs, float* y) {
  for (int j = 0; j < 8; ++j) {
    y[j] = db * GridByte(entry, j) * ((signs & kKmaskIq2xs[j]) != 0 ? -1.0f : 1.0f);
  }
}

// 8 values from two 4-value grid vectors (IQ3); bit j of `signs` negates value j.
inline void Emit4x2(float db, uint32_t lo, uint32_t hi, uint8_t signs, float* y) {
  for (int j = 0; j < 4; ++j) {
    y[j] = db * GridByte(lo, j) * ((signs & kKmaskIq2xs[j]) != 0 ? -1.0f : 1.0f);
    y[j + 4] = db * GridByte(hi, j) * ((signs & kKmaskIq2xs[j + 4]) != 0 ? -1.0f : 1.0f);
  }
}

// 8 values of an IQ1 grid vector (int8 -1/0/+1) shifted by delta under scale dl.
inline void EmitIq1(float dl, uint64_t entry, float delta, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<int8_t>(GridByte(entry, j)) + delta);
}

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian host, as the GGUF layouts assume
  return v;
}

}  // namespace

void DequantIQ2_XXS(const void* x, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ2_XXS*>(x);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const uint16_t* q = b[i].qs + 4 * sb;
      const uint32_t idx = q[0] | (static_cast<uint32_t>(q[1]) << 16);
      const uint32_t meta = q[2] | (static_cast<uint32_t>(q[3]) << 16);
      const float db = d * (0.5f + (meta >> 28)) * 0.25f;
      for (int g = 0; g < 4; ++g, y += 8) {
        Emit8(db, kIq2xxsGrid[(idx >> (8 * g)) & 255], kKsignsIq2xs[(meta >> (7 * g)) & 127], y);
      }
    }
  }
}

void DequantIQ2_XS(const void* x, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ2_XS*>(x);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const float db[2] = {d * (0.5f + (b[i].scales[sb] & 0xF)) * 0.25f,
                           d * (0.5f + (b[i].scales[sb] >> 4)) * 0.25f};
      for (int g = 0; g < 4; ++g, y += 8) {
        const uint16_t q = b[i].qs[4 * sb + g];
        Emit8(db[g / 2], kIq2xsGrid[q & 511], kKsignsIq2xs[q >> 9], y);
      }
    }
  }
}

void DequantIQ2_S(const void* x, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ2_S*>(x);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    const uint8_t* signs = b[i].qs + 32;
    for (int sb = 0; sb < 8; ++sb) {
      const float db[2] = {d * (0.5f + (b[i].scales[sb] & 0xF)) * 0.25f,
                           d * (0.5f + (b[i].scales[sb] >> 4)) * 0.25f};
      for (int g = 0; g < 4; ++g, y += 8) {
        const int grp = 4 * sb + g;
        const int idx = b[i].qs[grp] | (((b[i].qh[sb] >> (2 * g)) & 3) << 8);
        Emit8(db[g / 2], kIq2sGrid[idx], signs[grp], y);
      }
    }
  }
}

void DequantIQ3_XXS(const void* x, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ3_XXS*>(x);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* idx = b[i].qs + 8 * sb;
      const uint32_t meta = LoadU32(b[i].qs + 64 + 4 * sb);
      const float db = d * (0.5f + (meta >> 28)) * 0.5f;
      for (int g = 0; g < 4; ++g, y += 8) {
        Emit4x2(db, kIq3xxsGrid[idx[2 * g]], kIq3xxsGrid[idx[2 * g + 1]],
                kKsignsIq2xs[(meta >> (7 * g)) & 127], y);
      }
    }
  }
}

void DequantIQ3_S(const void* x, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ3_S*>(x);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const int s = sb % 2 == 0 ? b[i].scales[sb / 2] & 0xF : b[i].scales[sb / 2] >> 4;
      const float db = d * (1 + 2 * s);
      const uint8_t* qs = b[i].qs + 8 * sb;
      const int qh = b[i].qh[sb];
      for (int g = 0; g < 4; ++g, y += 8) {
        const int lo = qs[2 * g] | (((qh >> (2 * g)) & 1) << 8);
        const int hi = qs[2 * g + 1] | (((qh >> (2 * g + 1)) & 1) << 8);
        Emit4x2(db, kIq3sGrid[lo], kIq3sGrid[hi], b[i].signs[4 * sb + g], y);
      }
    }
  }
}

void DequantIQ1_S(const void* x, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ1_S*>(x);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int sb = 0; sb < 8; ++sb) {
      const int qh = b[i].qh[sb];
      const float dl = d * (2 * ((qh >> 12) & 7) + 1);
      const float delta = (qh & 0x8000) != 0 ? -kIq1Delta : kIq1Delta;
      for (int g = 0; g < 4; ++g, y += 8) {
        const int idx = b[i].qs[4 * sb + g] | (((qh >> (3 * g)) & 7) << 8);
        EmitIq1(dl, kIq1sGrid[idx], delta, y);
      }
    }
  }
}

void DequantIQ1_M(const void* x, float* y, int64_t nb) {
  const auto* b = static_cast<const BlockIQ1_M*>(x);
  for (int64_t i = 0; i < nb; ++i) {
    uint16_t sc[4];
    std::memcpy(sc, b[i].scales, 8);
    const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                 ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    const float d = F16ToF32(dbits);
    for (int sb = 0; sb < 8; ++sb) {
      const int shift = 6 * (sb % 2);
      const float dl[2] = {d * (2 * ((sc[sb / 2] >> shift) & 7) + 1),
                           d * (2 * ((sc[sb / 2] >> (shift + 3)) & 7) + 1)};
      for (int g = 0; g < 4; ++g, y += 8) {
        const int grp = 4 * sb + g;
        const int nib = (b[i].qh[grp / 2] >> (4 * (grp % 2))) & 0xF;
        const float delta = (nib & 8) != 0 ? -kIq1Delta : kIq1Delta;
        EmitIq1(dl[g / 2], kIq1sGrid[b[i].qs[grp] | ((nib & 7) << 8)], delta, y);
      }
    }
  }
}

}  // namespace tarmac::quant_grid
