// MatVecMulti: a weight matrix times a few activation rows (2..kMatVecMultiMaxTokens, in groups
// of at most 6 that reuse each row from L1/L2): small decode batches and speculative
// verification, where the work is still bound by reading the weights. Every weight row is read
// once from memory and dotted with all token rows in registers, 4 rows at a time so that each
// x load serves several rows (x of a wide matrix lives in L2); unlike MatMul there is no
// packing, whose cost (a full f32 copy of the weights per call) only pays off when many tokens
// share it.
//
// F32/F16/BF16 rows are converted in registers; other dtypes are dequantized one row at a time
// into a per-thread buffer (kernels::DequantizeRow, exact) and dotted from there.
// Owns nothing; pure function; writes only y. Numerics: f32 accumulation in 2 lanes-wide
// partial sums per (row, token), |y - MatMulRef| <= ~1e-5 · sum_k |w_k x_k| (tested 1e-4).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/view.h"

namespace tarmac::kernels {

constexpr int64_t kMatVecMultiMaxTokens = 16;

// x: [n_tokens][w.cols] f32; y: [n_tokens][w.rows] f32 (must not alias x).
// Preconditions: IsMatVecType(w.type); 1 <= n_tokens <= kMatVecMultiMaxTokens; w.cols a
// multiple of the dtype's block size. pool may be nullptr.
void MatVecMulti(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// MatVecMulti of 1..4 matrices of one width with the same x rows (MatMulShared's form for a
// few tokens): one parallel region covers all their rows. ys[i]: [n_tokens][ws[i]->rows].
// Per matrix the results equal MatVecMulti's.
void MatVecMultiShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                       int64_t n_tokens, ThreadPool* pool);

}  // namespace tarmac::kernels
