// Reference quantizers (F32 -> each storage type), bit-compatible with the block layouts of
// quant_blocks.h, so any GGUF reader decodes what these write exactly as DequantizeRowRef does.
//
// Q8_0, Q4_0 and Q8_K follow llama.cpp's conventions (one absmax scale per block; Q4_0 and Q8_K
// map the value of largest magnitude to the most negative code, which gains one level of
// range). Q4_K and Q6_K search for each sub-block's scale (and min) with a small candidate
// sweep followed by weighted least-squares refits, then quantize those per-sub-block scales
// against a per-super-block f16 scale; the derivation is in the comments below.
//
// Pure functions, thread-safe. Non-finite inputs, and values whose scale does not fit an f16,
// are rejected with a Status naming the element or block.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_grid_types.h"
#include "tensor/quant_ref.h"
#include "tensor/quant_search.h"
#include "tensor/quantize_types.h"

namespace tarmac {
using namespace quant_search;  // NOLINT: the helpers this file is built from
namespace {

Status QuantizeQ8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
    float max, amax;
    SignedAbsMax(x, kQK8_0, &max, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kQ8_0, d, i, &y[i].d));
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
  return Status::Ok();
}

Status QuantizeQ4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
    float max, amax;
    SignedAbsMax(x, kQK4_0, &max, &amax);
    // The largest magnitude maps to code 0 (= -8), using all 16 levels on its side.
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kQ4_0, d, i, &y[i].d));
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(std::floor(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(std::floor(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(std::max(0, q0) | (std::max(0, q1) << 4));
    }
  }
  return Status::Ok();
}

Status QuantizeQ8_K(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max, amax;
    SignedAbsMax(x, kQK_K, &max, &amax);
    std::memset(&y[i], 0, sizeof(BlockQ8_K));
    if (amax == 0.0f) continue;
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, RoundToInt(iscale * x[j])));
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[i].qs[16 * g + j];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
  return Status::Ok();
}

}  // namespace

Status QuantizeRowRef(DType type, const float* src, void* dst, int64_t n,
                      const float* importance) {
  if (!IsComputeType(type)) {
    return Unimplemented("quantize to {} is not supported", DTypeName(type));
  }
  const int64_t bs = Traits(type).block_size;
  if (n < 0 || n % bs != 0) {
    return InvalidArgument("cannot quantize a row of {} elements to {}: not a multiple of {}", n,
                           DTypeName(type), bs);
  }
  TARMAC_RETURN_IF_ERROR(CheckFinite(type, src, n));
  const int64_t nb = n / bs;
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return Status::Ok();
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        d[i] = F32ToF16(src[i]);
        if ((d[i] & 0x7fff) == 0x7c00) {
          return InvalidArgument("cannot convert to f16: element {} = {} overflows", i, src[i]);
        }
      }
      return Status::Ok();
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        d[i] = F32ToBF16(src[i]);
        if ((d[i] & 0x7fff) == 0x7f80) {
          return InvalidArgument("cannot convert to bf16: element {} = {} overflows", i, src[i]);
        }
      }
      return Status::Ok();
    }
    case DType::kQ8_0: return QuantizeQ8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::kQ4_0: return QuantizeQ4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::kQ4_K: return quantize::QuantizeQ4_K(src, dst, nb, importance);
    case DType::kQ6_K: return quantize::QuantizeQ6_K(src, dst, nb, importance);
    case DType::kQ2_K: return quantize::QuantizeQ2_K(src, dst, nb, importance);
    case DType::kQ3_K: return quantize::QuantizeQ3_K(src, dst, nb, importance);
    case DType::kQ5_K: return quantize::QuantizeQ5_K(src, dst, nb, importance);
    case DType::kQ4_1: return quantize::QuantizeQ4_1(src, dst, nb, importance);
    case DType::kQ5_0: return quantize::QuantizeQ5_0(src, dst, nb, importance);
    case DType::kQ5_1: return quantize::QuantizeQ5_1(src, dst, nb, importance);
    case DType::kIQ4_NL: return quantize::QuantizeIQ4_NL(src, dst, nb, importance);
    case DType::kIQ4_XS: return quantize::QuantizeIQ4_XS(src, dst, nb, importance);
    case DType::kMXFP4: return quantize::QuantizeMXFP4(src, dst, nb, importance);
    case DType::kTQ1_0: return quantize::QuantizeTQ1_0(src, dst, nb, importance);
    case DType::kTQ2_0: return quantize::QuantizeTQ2_0(src, dst, nb, importance);
    case DType::kIQ2_XXS: return quant_grid::QuantizeIQ2_XXS(src, dst, nb, importance);
    case DType::kIQ2_XS: return quant_grid::QuantizeIQ2_XS(src, dst, nb, importance);
    case DType::kIQ2_S: return quant_grid::QuantizeIQ2_S(src, dst, nb, importance);
    case DType::kIQ3_XXS: return quant_grid::QuantizeIQ3_XXS(src, dst, nb, importance);
    case DType::kIQ3_S: return quant_grid::QuantizeIQ3_S(src, dst, nb, importance);
    case DType::kIQ1_S: return quant_grid::QuantizeIQ1_S(src, dst, nb, importance);
    case DType::kIQ1_M: return quant_grid::QuantizeIQ1_M(src, dst, nb, importance);
    case DType::kQ8_K: return QuantizeQ8_K(src, static_cast<BlockQ8_K*>(dst), nb);
    default: return Unimplemented("quantize to {} is not supported", DTypeName(type));
  }
}

}  // namespace tarmac
