#include "tensor/quant_ref.h"

#include <cstring>

#include "base/check.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_grid_types.h"

namespace tarmac {
namespace {

void DequantQ8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[i * kQK8_0 + j] = d * b[i].qs[j];
  }
}

void DequantQ4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[i * kQK4_0 + j] = d * ((b[i].qs[j] & 0xF) - 8);
      y[i * kQK4_0 + j + 16] = d * ((b[i].qs[j] >> 4) - 8);
    }
  }
}

void DequantQ4_K(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    const float dmin = F16ToF32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    float* out = y + i * kQK_K;
    for (int pair = 0; pair < 4; ++pair) {
      uint8_t sc, m;
      Q4KScaleMin(2 * pair, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      Q4KScaleMin(2 * pair + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) out[64 * pair + l] = d1 * (q[32 * pair + l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) out[64 * pair + 32 + l] = d2 * (q[32 * pair + l] >> 4) - m2;
    }
  }
}

void DequantQ6_K(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* sc = b[i].scales + 8 * half;
      float* out = y + i * kQK_K + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * sc[is] * q1;
        out[l + 32] = d * sc[is + 2] * q2;
        out[l + 64] = d * sc[is + 4] * q3;
        out[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void DequantQ4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const float d = F16ToF32(b[i].d), m = F16ToF32(b[i].m);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = (b[i].qs[j] & 0xF) * d + m;
      y[j + 16] = (b[i].qs[j] >> 4) * d + m;
    }
  }
}

// The 5-bit quant j (0..31) of a Q5_0 / Q5_1 block.
template <typename Block>
inline int Q5Quant(const Block& b, int j) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  const int lo = j < 16 ? b.qs[j] & 0xF : b.qs[j - 16] >> 4;
  return lo | static_cast<int>(((qh >> j) & 1) << 4);
}

void DequantQ5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK4_0; ++j) y[j] = (Q5Quant(b[i], j) - 16) * d;
  }
}

void DequantQ5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const float d = F16ToF32(b[i].d), m = F16ToF32(b[i].m);
    for (int j = 0; j < kQK4_0; ++j) y[j] = Q5Quant(b[i], j) * d + m;
  }
}

void DequantQ2_K(const BlockQ2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d), dmin = F16ToF32(b[i].dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const uint8_t sc = b[i].scales[e / 16];
      const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
      y[i * kQK_K + e] = dl * ((b[i].qs[32 * h + l] >> (2 * k)) & 3) - ml;
    }
  }
}

void DequantQ3_K(const BlockQ3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    uint8_t sc[16];
    Q3KScales(b[i].scales, sc);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const int lo = (b[i].qs[32 * h + l] >> (2 * k)) & 3;
      const int q = lo - ((b[i].hmask[l] >> (e / 32)) & 1 ? 0 : 4);
      y[i * kQK_K + e] = d * (sc[e / 16] - 32) * q;
    }
  }
}

void DequantQ5_K(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d), dmin = F16ToF32(b[i].dmin);
    float* out = y + i * kQK_K;
    for (int pair = 0; pair < 4; ++pair) {
      const uint8_t* ql = b[i].qs + 32 * pair;
      for (int half = 0; half < 2; ++half) {
        uint8_t sc, m;
        Q4KScaleMin(2 * pair + half, b[i].scales, &sc, &m);
        const float ds = d * sc, dm = dmin * m;
        for (int l = 0; l < 32; ++l) {
          const int lo = half == 0 ? ql[l] & 0xF : ql[l] >> 4;
          const int hi = (b[i].qh[l] >> (2 * pair + half)) & 1;
          out[64 * pair + 32 * half + l] = ds * (lo | (hi << 4)) - dm;
        }
      }
    }
  }
}

void DequantIQ4_NL(const BlockIQ4_NL* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const float d = F16ToF32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = d * kIq4nlValues[b[i].qs[j] & 0xF];
      y[j + 16] = d * kIq4nlValues[b[i].qs[j] >> 4];
    }
  }
}

void DequantIQ4_XS(const BlockIQ4_XS* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int s = 0; s < kQK_K / 32; ++s) {
      const int ls = ((b[i].scales_l[s / 2] >> (4 * (s % 2))) & 0xF) |
                     (((b[i].scales_h >> (2 * s)) & 3) << 4);
      const float dl = d * (ls - 32);
      const uint8_t* qs = b[i].qs + 16 * s;
      float* out = y + i * kQK_K + 32 * s;
      for (int j = 0; j < 16; ++j) {
        out[j] = dl * kIq4nlValues[qs[j] & 0xF];
        out[j + 16] = dl * kIq4nlValues[qs[j] >> 4];
      }
    }
  }
}

void DequantMXFP4(const BlockMXFP4* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
    const float d = E8M0HalfToF32(b[i].e);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = kMxfp4Values[b[i].qs[j] & 0xF] * d;
      y[j + 16] = kMxfp4Values[b[i].qs[j] >> 4] * d;
    }
  }
}

void DequantTQ1_0(const BlockTQ1_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    float* out = y + i * kQK_K;
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 32; ++m) out[32 * n + m] = (TQ1Trit(b[i].qs[m], n) - 1) * d;
      for (int m = 0; m < 16; ++m) out[160 + 16 * n + m] = (TQ1Trit(b[i].qs[32 + m], n) - 1) * d;
    }
    for (int n = 0; n < 4; ++n) {
      for (int j = 0; j < 4; ++j) out[240 + 4 * n + j] = (TQ1Trit(b[i].qh[j], n) - 1) * d;
    }
  }
}

void DequantTQ2_0(const BlockTQ2_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(b[i].d);
    for (int e = 0; e < kQK_K; ++e) {
      const int q = (b[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      y[i * kQK_K + e] = (q - 1) * d;
    }
  }
}

void DequantQ8_K(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < kQK_K; ++j) y[i * kQK_K + j] = b[i].d * b[i].qs[j];
}

}  // namespace

bool IsComputeType(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ5_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kMXFP4:
    case DType::kTQ1_0:
    case DType::kTQ2_0:
    case DType::kIQ2_XXS:
    case DType::kIQ2_XS:
    case DType::kIQ2_S:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
    case DType::kIQ1_S:
    case DType::kIQ1_M:
      return true;
    default:
      return false;
  }
}

void DequantizeRowRef(DType type, const void* src, float* dst, int64_t n) {
  TARMAC_CHECK(IsComputeType(type));
  TARMAC_CHECK(n % Traits(type).block_size == 0);
  const int64_t nb = n / Traits(type).block_size;
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(s[i]);
      return;
    }
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(s[i]);
      return;
    }
    case DType::kQ8_0: return DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case DType::kQ4_0: return DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case DType::kQ4_K: return DequantQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
    case DType::kQ6_K: return DequantQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
    case DType::kQ8_K: return DequantQ8_K(static_cast<const BlockQ8_K*>(src), dst, nb);
    case DType::kQ4_1: return DequantQ4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case DType::kQ5_0: return DequantQ5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case DType::kQ5_1: return DequantQ5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case DType::kQ2_K: return DequantQ2_K(static_cast<const BlockQ2_K*>(src), dst, nb);
    case DType::kQ3_K: return DequantQ3_K(static_cast<const BlockQ3_K*>(src), dst, nb);
    case DType::kQ5_K: return DequantQ5_K(static_cast<const BlockQ5_K*>(src), dst, nb);
    case DType::kIQ4_NL: return DequantIQ4_NL(static_cast<const BlockIQ4_NL*>(src), dst, nb);
    case DType::kIQ4_XS: return DequantIQ4_XS(static_cast<const BlockIQ4_XS*>(src), dst, nb);
    case DType::kMXFP4: return DequantMXFP4(static_cast<const BlockMXFP4*>(src), dst, nb);
    case DType::kTQ1_0: return DequantTQ1_0(static_cast<const BlockTQ1_0*>(src), dst, nb);
    case DType::kTQ2_0: return DequantTQ2_0(static_cast<const BlockTQ2_0*>(src), dst, nb);
    case DType::kIQ2_XXS: return quant_grid::DequantIQ2_XXS(src, dst, nb);
    case DType::kIQ2_XS: return quant_grid::DequantIQ2_XS(src, dst, nb);
    case DType::kIQ2_S: return quant_grid::DequantIQ2_S(src, dst, nb);
    case DType::kIQ3_XXS: return quant_grid::DequantIQ3_XXS(src, dst, nb);
    case DType::kIQ3_S: return quant_grid::DequantIQ3_S(src, dst, nb);
    case DType::kIQ1_S: return quant_grid::DequantIQ1_S(src, dst, nb);
    case DType::kIQ1_M: return quant_grid::DequantIQ1_M(src, dst, nb);
    default: TARMAC_CHECK(false);
  }
}

}  // namespace tarmac
