// Dot products and matrix-vector products of a weight matrix (any compute dtype) with an f32
// vector: the decode-time kernels (one token: every weight is read once, so these are limited
// by memory bandwidth; the SIMD code decodes blocks in registers and never writes them out).
//
// Owns nothing; pure functions. Writes only y. Thread-safe; MatVec uses the given pool (see
// ThreadPool: one ParallelFor caller at a time per pool).
//
// Numerics: F32/F16/BF16 rows are dotted with x in f32 (four accumulators). For Q8_0, Q4_0,
// Q4_K and Q6_K, x is first quantized to int16 per 32-element block (step max_b|x| / 32767,
// round to nearest even), each block's q·x is an exact integer (widening i16 multiply-add),
// scaled in f32 once per block / 16-group; block offsets and Q4_K mins fold in through
// per-block sums of the quantized x. Against DotRef (double, exact weights and x):
//   |err| <= ~1e-5 · sum_k |w_k x_k|  (f32 accumulation)
//          + sum over 32-blocks b of (max_b |x| / 65534) · sum_{k in b} |w_k|  (int16 x; quant
//            types only: ~1e-5 relative for even x, more when a block mixes magnitudes).
// The tests check 1e-4 · sum |w x| plus 1.05 × the second term. int16 keeps x ~2^8 times
// more precise than llama.cpp's int8 (Q8_0/Q8_K) activations, but widening every weight to
// i16 costs vector-port time: on CPUs with AVX-512 VNNI, MatMul runs one-token Q8_0 / Q4_0
// products through MatVecInt8 instead (matvec_int8.h: int8 x, vpdpbusd; faster decode,
// bench/NOTES.md), and from AVX2 up Q6_K products through MatVecQ6K (a few tokens,
// matvec_q6k.h) and MatMulQ6K (more, matmul_q6k.h).
// Dot/MatVec results do not depend on the thread count; they may differ (within the bound)
// between SIMD targets.
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

// MatVec of 1..4 matrices of one dtype and width with the same x (a layer's Q/K/V, or
// gate/up; MatMulShared's form for one token): x is prepared once and one parallel region
// covers all their rows. ys[i]: ws[i]->rows floats. Per matrix the results equal MatVec's.
void MatVecShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                  ThreadPool* pool);

// Scalar references: dequantize with DequantizeRowRef and accumulate in double.
double DotRef(DType type, const void* row, const float* x, int64_t n);
void MatVecRef(const MatrixView& w, const float* x, float* y);

}  // namespace tarmac::kernels
