// The reference quantizer of each block type, one function per type (QuantizeRowRef in
// quant_ref.h dispatches to them). Each writes nb blocks for x[0 .. nb * block size).
// importance: nullptr, or one non-negative weight per element of x (an imatrix's column
// weights repeated per row) that scales the error the searches minimise.
// Preconditions: x finite (QuantizeRowRef checks). Errors: a scale beyond its field's range.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace tarmac::quantize {

// quantize_kquants.cc: super-blocks of 256.
Status QuantizeQ2_K(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeQ3_K(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeQ4_K(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeQ5_K(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeQ6_K(const float* x, void* y, int64_t nb, const float* importance);

// quantize_small.cc: blocks of 32 and the 4-bit, FP4 and ternary types.
Status QuantizeQ4_1(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeQ5_0(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeQ5_1(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeIQ4_NL(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeIQ4_XS(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeMXFP4(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeTQ1_0(const float* x, void* y, int64_t nb, const float* importance);
Status QuantizeTQ2_0(const float* x, void* y, int64_t nb, const float* importance);

}  // namespace tarmac::quantize
