// Reference (scalar, obviously-correct) conversions between F32 and every compute dtype.
// Optimised kernels are tested against these. Pure functions, thread-safe.
//
// Rows: n elements, n a multiple of the type's block size (asserted).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "tensor/dtype.h"

namespace tarmac {

// dst[0..n) = value of src row. Supports every type IsComputeType names.
void DequantizeRowRef(DType type, const void* src, float* dst, int64_t n);

// Writes RowBytes(type, n) bytes to dst. Supports every type IsComputeType names. Non-finite
// input values are an error (a quantized block cannot represent them). importance: nullptr, or
// n non-negative weights of each element's error (an imatrix's column weights), which the
// types with a scale search honour (the K types, IQ4_NL/IQ4_XS, MXFP4, the IQ grid types) and
// the others ignore (the floats, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, TQ1_0, TQ2_0, Q8_K).
Status QuantizeRowRef(DType type, const float* src, void* dst, int64_t n,
                      const float* importance = nullptr);

// True if DequantizeRowRef/QuantizeRowRef support the type: every type llama.cpp computes
// (F32, F16, BF16, the legacy, K, IQ, MXFP4 and TQ types), and Q8_K (an activation format).
bool IsComputeType(DType type);

}  // namespace tarmac
