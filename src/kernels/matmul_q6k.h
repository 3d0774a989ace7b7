// MatMulQ6K: the GEMM for Q6_K weights with 8-bit activations on AVX2 (prefill, and batches
// from kQ6KGemmMinTokens tokens; fewer run MatVecQ6K, matvec_q6k.h, which reads the GGUF
// blocks row by row).
//
// Why: without it Q6_K prefill converted every weight to f32 panels per call and ran f32
// FMAs, half the speed of the Q4_K int8 GEMM (bench/NOTES.md). vpmaddubsw multiplies 32 byte
// pairs per instruction where an f32 FMA multiplies 8.
//
// Scheme: x is quantized as MatMulInt8 does it (per 32-block d = max|x| / 127,
// q = round_to_nearest_even(x / d); QuantizeActivationsQ8Ref). Threads split weight rows;
// for each K chunk (two super-blocks), a row block's weights are unpacked once per call into
// slabs of 16 rows: per 32-block, u = w + 32 (0..63) as [8 k-groups][16 rows][4 k] bytes,
// each row's two 16-element scales as int16 pairs (sc, sc), and each row's super-block d.
// The micro-kernel (one 8-row half, up to 4 tokens) takes a 16-element sub-block's four
// k-groups: vpmaddubsw(u, q) pair sums (at most 63·127·2, no saturation) add modulo 2^16 with
// the bias 32·Σq of their lanes subtracted, which leaves the exact Σ w·q (|.| <= 32512) in
// each int16 lane; vpmaddwd with (sc, sc) gives sc·Σ w·q per row in int32. Per 32-block and
// row, isum = the two sub-blocks' sums (|isum| < 2^24, so f32(isum) is exact) and
//   acc = fma(f32(isum), d_w · d_x, acc)
// in block order, in f32.
//
// Numerics: the integers are exact and the f32 operations are MatMulQ6KRef's, in its order,
// so the results are bit-identical to it at every thread count and K chunking; a token's
// result does not depend on the other tokens of the call. Against the exact product with
// these activations (MatVecQ6KRef, double accumulation) the f32 accumulation over K/32
// blocks adds at most (K/32 + 1) · 2^-24 · sum_k |w_k| · |d_b q_k|.
//
// Owns nothing but each calling thread's activation buffer and each worker's slab scratch
// (thread_local, grow only). Thread-safe per pool (one ParallelFor caller at a time).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// From this many tokens the GEMM beats MatVecQ6K, whose per-row passes unpack the weights
// again for every 4 tokens (BM_MatMulTokens/q6_K, bench/NOTES.md); the dispatch table uses it.
constexpr int64_t kQ6KGemmMinTokens = 5;

// True when the kernel can run now: x86 with the active ISA level avx2 or above.
bool MatMulQ6KAvailable();

// y[t][r] = row r · x[t] for t < n_tokens. x: [n_tokens][w.cols] floats; y: [n_tokens][w.rows]
// floats (no aliasing). Preconditions: w.type == Q6_K; w.cols % 256 == 0; n_tokens >= 0;
// MatMulQ6KAvailable(). pool may be nullptr.
void MatMulQ6K(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// Scalar reference: the same activation quantization, integers and f32 operations in the same
// order, from the GGUF layout element by element. Same shapes and preconditions, less the ISA
// one.
void MatMulQ6KRef(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

}  // namespace tarmac::kernels
