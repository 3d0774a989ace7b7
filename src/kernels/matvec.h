// Dot products and matrix-vector products of a weight matrix (any compute dtype) with an f32
// vector: the decode-time kernels (one token: every weight is read once, so these are limited
// by memory bandwidth; the SIMD code decodes blocks in registers and never writes them out).
//
// Owns nothing; pure functions. Writes only y. Thread-safe; MatVec uses the given pool (see
// ThreadPool: one ParallelFor caller at a time per pool).
//
// Numerics: activations stay f32 (no activation quantization). Per block the kernels form
// q·x in f32 and scale it once, and fold block offsets (Q4_0's -8, Q6_K's -32, Q4_K's mins)
// in through per-block sums of x, so results differ from DotRef by f32 rounding only:
// |Dot - DotRef| <= ~1e-5 · (sum_k |w_k x_k| + sum over blocks of |offset · sum x|) for rows
// of a few thousand elements; the tests check 1e-4 · sum_k |w_k x_k|.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/dtype.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// Weight dtypes the matvec/matmul kernels accept: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K.
bool IsMatVecType(DType type);

// Returns sum_k value(row)[k] * x[k]. row: RowBytes(type, n) bytes; x: n floats.
// Preconditions: IsMatVecType(type); n >= 0 and a multiple of the block size.
float Dot(DType type, const void* row, const float* x, int64_t n);

// y[r] = Dot(w.row(r), x) for r in [0, w.rows). x: w.cols floats; y: w.rows floats (must not
// alias x). Rows are split across pool threads in contiguous chunks; pool may be nullptr
// (runs on the calling thread).
void MatVec(const MatrixView& w, const float* x, float* y, ThreadPool* pool);

// Scalar references: dequantize with DequantizeRowRef and accumulate in double.
double DotRef(DType type, const void* row, const float* x, int64_t n);
void MatVecRef(const MatrixView& w, const float* x, float* y);

}  // namespace tarmac::kernels
