// DequantizeRow: SIMD conversion of one row of any compute dtype to f32, dispatched at run
// time to the best SIMD target (AVX-512, AVX2 or a portable fallback).
//
// Owns nothing; pure function, thread-safe. Writes only dst.
// Results equal DequantizeRowRef (tensor/quant_ref.h) bit for bit: every value is formed with
// the same float operations in the same order (int -> float conversion is exact, then the
// same products and differences, never fused), and f16/bf16 conversion is exact.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace tarmac::kernels {

// dst[0..n) (f32) = values of the row at src (RowBytes(type, n) bytes).
// Preconditions: IsComputeType(type) (Highway for F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q8_K;
// the other types through DequantizeBlocksRow (AVX2, dequant_blocks.h) where it runs, else
// DequantizeRowRef);
// n >= 0 and a multiple of the type's block size; src and dst do not overlap.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

}  // namespace tarmac::kernels
