// MatMulInt8: prefill GEMM for Q8_0 / Q4_0 / Q4_K weights with 8-bit activations and integer
// dot products (the llama.cpp strategy: activations quantized per 32-element block, int32
// products per block, f32 scaling per block). Q6_K (16-element sub-blocks, its GGUF layout)
// has kernels of its own with these activations: MatVecQ6K (matvec_q6k.h) and MatMulQ6K
// (matmul_q6k.h).
//
// Structure: the activations are quantized once per call (threads split tokens): per token and
// 32-element block b, d = max_b|x| / 127, q = round_to_nearest_even(x · (1/d)) in [-127, 127],
// stored as int8 with d (f32) and corr = -o · sum_b q, where o is the weight offset below.
// Threads split weight rows (ThreadPool::ParallelFor over row blocks). For each K chunk, a row
// block's weights are packed once into "slabs" of 16 rows: per 32-block, 8 groups of
// [16 rows][4 consecutive k] unsigned bytes (u = w + o: Q8_0 o = 128, Q4_0 o = 8, i.e. the raw
// nibble; Q4_K o = 0, its 32-element sub-blocks being our blocks) followed by the 16 f32 row
// scales (Q4_K: d·sc) and, for Q4_K, the 16 f32 mins (dmin·m), which enter as
// - min · (d_x · sum_b q) per block (llama.cpp's bsums idea); then a register-blocked
// micro-kernel runs MR tokens × NR rows, reusing each loaded weight vector across MR tokens:
//   AMX-INT8:     one tile product per block for 16 tokens × 16 rows (matmul_int8_amx.h),
//                 on slabs made signed after packing (w itself, so no correction), MR = 16,
//                 NR = 16; used where the CPU has AMX and AmxEnabled();
//   AVX-512 VNNI: vpdpbusd (u8 weights × broadcast s8 activations) into int32 accumulators
//                 started at corr (so the offset o cancels exactly), MR = 6, NR = 32;
//   AVX2:         Q4_0 / Q4_K: unsigned nibbles × x by vpmaddubsw, summed in int16, one
//                 vpmaddwd per block; Q8_0: |w| · sign(x, w) by vpmaddubsw + vpmaddwd on
//                 slabs made signed (no saturation: |w| <= 128, |x| <= 127); MR = 6, NR = 16;
//   AVX-VNNI:     vpdpbusd on ymm (u8 weights, the VNNI path's correction), MR = 6, NR = 16;
//   scalar:       the same integers in plain C++.
// Per block and output: acc = fma(float(isum), dw · dx, acc) (Q4_K then
// acc = fma(-min, dx · float(sum_b q), acc)) in block order, in f32. isum is
// exact and the f32 operations are the same on every path, so all paths (and thread counts,
// and K chunking) give bit-identical results, equal to MatMulInt8Ref.
//
// Numerics against the exact product (MatMulRef: exact weights, f32 x, double accumulation):
//   |y - y_exact| <= sum_b (max_b|x| / 254) · sum_{k in b} |w_k|     (activation rounding)
//                  + ~K/32 · 2^-24 · sum_k |w_k x_k|                 (f32 over blocks)
// i.e. the activation rounding error is at most half a quantization step of each block's x.
// Observed (matmul_int8_test): max |err| / sum_k |w_k x_k| = 0.2% for gaussian x, ~1% (K >=
// 256) to 6% (K = 32) when a block mixes values four decades apart (small ones round to 0).
// Same scheme as
// llama.cpp's Q8_0 activations, which additionally round d to f16 (we keep d in f32).
// wp-11m perplexity changes by < 0.05% (q8_0 +0.001%, q4_0 -0.03%, q4_k -0.02%) vs the f32
// path.
// Blocks with max|x| < 2^-100 are treated as zero. Non-finite x in a block gives NaN outputs.
//
// Q8_0 / Q4_0 weights with a QuantInterleaved copy in MatrixView::prepared (quant_interleaved.h)
// are packed from that copy instead, which is the same integers already in slab order; w.data is then
// not read (the model may release the GGUF bytes).
//
// Owns nothing; pure functions. Thread-safe per pool (one ParallelFor caller at a time).
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/dtype.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// Weight types MatMulInt8 handles: Q8_0, Q4_0, Q4_K.
bool IsInt8MatMulType(DType type);

// x: [n_tokens][w.cols] f32, y: [n_tokens][w.rows] f32 (must not alias x). pool may be nullptr.
// Preconditions: IsInt8MatMulType(w.type); n_tokens >= 0; w.cols a multiple of the block size.
void MatMulInt8(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// Scalar reference that quantizes the activations the same way and accumulates in the same
// order: MatMulInt8 must match it bit for bit.
void MatMulInt8Ref(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

// u = w + offset, the unsigned weight bytes the int8 kernels multiply: Q8_0 128 (int8 ->
// uint8), Q4_0 8 (the raw nibble), Q4_K 0 (nibbles are unsigned; the mins go through the
// per-block activation sums instead). The activations' corr = -offset · sum q cancels it.
int WeightOffset(DType t);

// The activation quantization of one row of n floats (n % 32 == 0), as MatMulInt8 uses it:
// q[n], d[n/32]. Exposed for tests.
void QuantizeActivationsQ8Ref(const float* x, int64_t n, int8_t* q, float* d);

// The same quantization on this machine's fastest path (bit-identical to the reference), with
// the per-block integer corrections the int8 kernels use: corr[b] = -offset · sum_b q and
// s[b] = d[b] · sum_b q. q[n], d/corr/s[n/32]. Preconditions: n % 32 == 0.
void QuantizeActivationsQ8(const float* x, int64_t n, int offset, int8_t* q, float* d,
                           int32_t* corr, float* s);

// Which code path MatMulInt8 takes now: "amx-int8", "avx512vnni", "avx2-vnni", "avx2" or
// "scalar", from the active ISA level (cpu_features.h).
const char* Int8MatMulPath();

}  // namespace tarmac::kernels
