// DequantizeBlocksRow: AVX2 decoding to f32 of the block types MatVecBlocks computes (the K,
// IQ, MXFP4, legacy and ternary types without a decoder in dequant.cc), from the same unit
// decoders (block_decode_avx2-inl.h). DequantizeRow (dequant.h) calls it where it can run;
// the panels GEMM, matvec-multi and the AMX copies read rows through that.
//
// Results equal DequantizeRowRef bit for bit: each value is s · w (+ o for the affine types)
// with the reference decode's own scale products, int -> float exact, never fused (the build
// is ISO C++, no contraction). Pure function, thread-safe; writes only dst.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace tarmac::kernels {

// True when DequantizeBlocksRow runs for this type now (x86, AVX2 or above, a MatVecBlocks type).
bool DequantizeBlocksAvailable(DType type);

// dst[0..n) (f32) = the row at src. Preconditions: DequantizeBlocksAvailable(type); n >= 0 and
// a multiple of the type's block size; src and dst do not overlap.
void DequantizeBlocksRow(DType type, const void* src, float* dst, int64_t n);

}  // namespace tarmac::kernels
