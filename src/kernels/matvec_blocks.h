// MatVecBlocks: products of weights in the block types that have no kernel of their own
// elsewhere (Q2_K, Q3_K, Q5_K, IQ4_XS, IQ4_NL, MXFP4, Q4_1, Q5_0, Q5_1, TQ1_0, TQ2_0 and the
// IQ grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M), read
// straight from their GGUF blocks, with 1..kBlocksMaxTokens tokens (decode, small decode
// batches, speculative verification) and 8-bit activations, on AVX2. No prepared copy: the
// GGUF bytes are the only copy.
//
// Scheme: x is quantized as MatMulInt8 does it (per 32-block d_x = max|x| / 127, q =
// round_to_nearest_even(x / d_x); QuantizeActivationsQ8), and the sum of q over each 16
// elements is kept. Each unit of 256 weights is decoded once per call into signed int8 weights
// w with a scale s and offset o per 16 (block_decode_avx2-inl.h, block_decode_grid_avx2-inl.h),
// then for every token
//   sum_e value_e · x_e ~ sum_g d_x · (s_g · sum_{e in g} w_e q_e + o_g · sum_{e in g} q_e)
// with vpmaddubsw(|w|, sign(q, w)) and vpmaddwd giving exact int32 sums of w·q per 4 weights.
// Tokens share the decode, so 2..16 tokens cost little more than one in decode work.
// The K types with integer sub-block scales (Q2_K, Q3_K, Q5_K, IQ4_XS) instead quantize x per
// 256 (one scale per super-block, as llama.cpp's Q8_K) and keep each super-block's sums in
// int32, scaled by the integer sub-block scales (vpmaddwd), converting to float once per
// super-block and token.
//
// Numerics: the activation rounding of MatMulInt8 (half a step of each 32-block's x; of each
// 256-block's for the K types above); the
// integers are exact, so against MatVecBlocksRef (the reference decode times the same
// quantized x, summed in double) |y - ref| <= (K / 4 + 32) · 2^-23 · sum_k |value_k| · |d_b q_k|
// (f32 products and sums of the per-group terms). A token's result does not depend on the
// token count, the thread count or the row stride.
//
// Owns nothing but each calling thread's activation buffer (thread_local, grows only).
// Thread-safe per pool (one ParallelFor caller at a time).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/dtype.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// Tokens one call takes.
constexpr int64_t kBlocksMaxTokens = 16;

// The types this kernel computes.
bool MatVecBlocksSupports(DType type);

// True when the kernel can run now: x86 with the active ISA level avx2 or above.
bool MatVecBlocksAvailable();

// y[t][r] = row r · x[t] for t < n_tokens. x: [n_tokens][w.cols] floats; y: [n_tokens][w.rows]
// floats (no aliasing). Preconditions: MatVecBlocksSupports(w.type); w.cols a multiple of the
// block size; 1 <= n_tokens <= kBlocksMaxTokens; MatVecBlocksAvailable(). pool may be nullptr.
void MatVecBlocks(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool* pool);

// Scalar reference: DequantizeRowRef's values times the same quantized activations, summed in
// double. Same shapes and preconditions, less the ISA one.
void MatVecBlocksRef(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

}  // namespace tarmac::kernels
