// Reference (scalar, obviously-correct) conversions between F32 and every compute dtype.
// Optimised kernels are tested against these. Pure functions, thread-safe.
//
// Rows: n elements, n a multiple of the type's block size (asserted).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "tensor/dtype.h"

namespace tarmac {

// dst[0..n) = value of src row. Supports F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q8_K.
void DequantizeRowRef(DType type, const void* src, float* dst, int64_t n);

// Writes RowBytes(type, n) bytes to dst. Supports F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q8_K.
// Non-finite input values are an error (a quantized block cannot represent them).
Status QuantizeRowRef(DType type, const float* src, void* dst, int64_t n);

// True if DequantizeRowRef/QuantizeRowRef support the type.
bool IsComputeType(DType type);

}  // namespace tarmac
