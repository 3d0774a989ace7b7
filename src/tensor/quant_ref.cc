#include "tensor/quant_ref.h"

#include <cstring>

#include "base/check.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

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
    default: TARMAC_CHECK(false);
  }
}

}  // namespace tarmac
