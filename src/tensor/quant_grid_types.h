// The codebook ("grid") quantization types of the GGUF format: IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S and IQ1_M. Each stores, per group of 8 (IQ2/IQ1) or 4 (IQ3) weights,
// an index into a fixed codebook of magnitudes, sign bits and per-sub-block scales; the block
// layouts and codebooks are those of llama.cpp's files (facts of the format, implemented here).
//
// Scalar reference code: DequantizeRowRef / QuantizeRowRef (quant_ref.h) call these; kernels
// are tested against them. Pure functions, thread-safe.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "tensor/dtype.h"

namespace tarmac::quant_grid {

// y[0 .. nb*256) = the values of nb blocks at x (the type's bytes per block each).
void DequantIQ2_XXS(const void* x, float* y, int64_t nb);
void DequantIQ2_XS(const void* x, float* y, int64_t nb);
void DequantIQ2_S(const void* x, float* y, int64_t nb);
void DequantIQ3_XXS(const void* x, float* y, int64_t nb);
void DequantIQ3_S(const void* x, float* y, int64_t nb);
void DequantIQ1_S(const void* x, float* y, int64_t nb);
void DequantIQ1_M(const void* x, float* y, int64_t nb);

// Writes nb blocks for x[0 .. nb*256). importance: nullptr, or nb*256 non-negative weights of
// each element's error (llama.cpp's imatrix values for the row's columns, repeated per row).
// Preconditions: x finite (the caller checks). Errors: a scale beyond f16 range.
Status QuantizeIQ2_XXS(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeIQ2_XS(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeIQ2_S(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeIQ3_XXS(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeIQ3_S(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeIQ1_S(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeIQ1_M(const float* x, void* y, int64_t nb, const float* importance);

// True for the seven types above.
bool IsGridType(DType type);

// nb valid blocks of `type` (IsGridType) with random codes (grid indices, signs, sub-block
// scales) from the stream `seed`, each block's d set so that its decoded values have RMS `rms`
// (> 0): what make-random writes for these types, since searching a codebook for random floats
// costs far more than drawing codes. Deterministic in (type, seed, rms, nb).
void RandomGridBlocks(DType type, uint64_t seed, float rms, void* dst, int64_t nb);

}  // namespace tarmac::quant_grid
