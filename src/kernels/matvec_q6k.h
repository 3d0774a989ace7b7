// MatVecQ6K: products of Q6_K weights, read straight from their GGUF blocks, with 1..16 tokens
// (decode, small decode batches, speculative verification) and 8-bit activations, on AVX2.
// MatMul runs it below kQ6KGemmMinTokens tokens (matmul_q6k.h), where MatMulQ6K's per-call
// unpacking does not yet pay.
//
// Why: MatVec (matvec.h) widens every 6-bit weight to i16 for vpmaddwd and runs out of vector
// ports before memory bandwidth on CPUs without AVX-512 (Q6_K decode was the slowest of the
// quantized types against llama.cpp; bench/NOTES.md). Here a ymm holds 32 weights as bytes
// (0..63) and vpmaddubsw multiplies them with signed int8 activations, about half the vector
// work per weight. Q6_K keeps no prepared copy: the GGUF bytes are the only copy.
//
// Scheme: x is quantized exactly as MatMulInt8 does it (per 32-block d = max|x| / 127,
// q = round_to_nearest_even(x / d); QuantizeActivationsQ8Ref). For each 32-weight chunk of a
// super-block (ql low/high nibbles with two qh bits each, as the GGUF layout orders them),
// vpmaddubsw gives pair sums u·q (u = w + 32 in 0..63), the bias 32·(q_a + q_b) (computed once
// per call) is subtracted, so the int16 lanes hold exact pair sums of w·q (|.| <= 8128), and
// vpmaddwd with the chunk's two 16-element scales widens them to int32. Then per chunk
//   acc = fma(f32(isum), d_w · d_x, acc)
// in 8 lanes and two accumulators per token (alternate chunks), summed at the row's end. One
// token walks two rows at once, the first half of a thread's rows beside the second (two
// weight streams; bench/NOTES.md).
//
// Numerics: the same activation rounding as MatMulInt8 (half a step of each 32-block's x);
// the integers are exact, so against MatVecQ6KRef (the same integers, double accumulation)
//   |y - ref| <= (K/16 + 16) · 2^-23 · sum_k |w_k| · |d_b q_k|.
// A token's result does not depend on the token count of the call, the thread count, or the
// row stride.
//
// Owns nothing but each calling thread's activation buffer (thread_local, grows only).
// Thread-safe per pool (one ParallelFor caller at a time).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// Tokens one call takes.
constexpr int64_t kQ6KMaxTokens = 16;

// True when the kernel can run now: x86 with the active ISA level avx2 or above.
bool MatVecQ6KAvailable();

// y[t][r] = row r · x[t] for t < n_tokens. x: [n_tokens][w.cols] floats; y: [n_tokens][w.rows]
// floats (no aliasing). Preconditions: w.type == Q6_K; w.cols % 256 == 0;
// 1 <= n_tokens <= kQ6KMaxTokens; MatVecQ6KAvailable(). pool may be nullptr.
void MatVecQ6K(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// Scalar reference: the same activation quantization and integers, accumulated in double from
// the GGUF layout element by element (no SIMD bit tricks). Same shapes and preconditions, less
// the ISA one.
void MatVecQ6KRef(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

}  // namespace tarmac::kernels
