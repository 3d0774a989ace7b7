// MatMulAmxStream: a few tokens (up to kAmxStreamMaxTokens, one AMX token tile) of F16, BF16 or
// F32 weights on AMX tiles, the weights split into hi/lo bf16 in registers as they stream from
// memory in their own row-major layout. For a model whose weights do not stay in cache this
// is the verify step of speculative decoding: it reads 2 bytes per f16 weight (the pre-split
// AmxPackedMatrix reads 2.5) and needs no prepared copy, and the tiles leave the vector units
// free for the split, so 7-16 tokens cost about what streaming the weights once costs
// (bench/NOTES.md, "verify step").
//
// Roles as in MatMulAmx without a prepared copy: each 32-row block of weights is tile A
// (16 rows × 32 k per tile, split per K step into a per-thread double buffer while the tiles
// multiply the previous step), the activations are tile B (pair layout, split once per call
// per thread, 2 tiles per K step), C is 32 weight rows × 16 tokens kept in tiles over all of
// K (no K chunks) and written transposed into y.
//
// Numerics: the split-bf16 products of matmul_amx.h (w_hi·x_hi + w_hi·x_lo + w_lo·x_hi; the
// weights' split is exact for F16/BF16, so the error is at most 2·2^-16 of sum_k |w_k x_k|
// plus f32 accumulation; tests check 5e-5). BF16 weights have no lo and skip that pass.
//
// Owns nothing; pure function; writes only ys. Scratch: per pool thread, the split activations
// (4·16·K bytes) and 8 KiB of weight tiles, thread-local and kept for reuse. Thread-safe per
// pool (one caller at a time).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/dtype.h"
#include "tensor/view.h"

namespace tarmac::kernels {

constexpr int64_t kAmxStreamMaxTokens = 16;
constexpr int kAmxStreamMaxShared = 4;

// The weight dtypes it reads (split in registers; nothing is dequantized).
inline bool AmxStreamSupports(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32;
}

// ys[i] = ws[i] · x for 1..kAmxStreamMaxShared matrices of one width (a layer's Q/K/V, or
// gate/up, in one parallel region; x is split once per thread). x: [n_tokens][cols];
// ys[i]: [n_tokens][ws[i]->rows]. Preconditions: AmxEnabled(); 1 <= n_tokens <=
// kAmxStreamMaxTokens; every ws[i] AmxStreamSupports(type), rows >= 1, cols == ws[0]->cols.
// pool may be nullptr.
void MatMulAmxStreamShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                           int64_t n_tokens, ThreadPool* pool);
// One matrix: MatMul's contract (matmul.h) under the preconditions above.
void MatMulAmxStream(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                     ThreadPool* pool);

}  // namespace tarmac::kernels
