// MatVecInt8: the batch-1 decode matvec for Q8_0 / Q4_0 weights with 8-bit activations and
// AVX-512 VNNI integer dot products: straight from the GGUF blocks, or from the interleaved copy
// the model makes at load (below).
//
// Why: with int16 activations (MatVec, vpmaddwd) every weight byte is widened to i16 first,
// and Q4_0 decode runs out of vector ports before it runs out of memory bandwidth (it trailed
// llama.cpp; bench/NOTES.md). vpdpbusd multiplies u8 weights with s8 activations four at a
// time, so the row streams at memory speed.
//
// Scheme: x is quantized exactly as MatMulInt8 does it (per 32-block d = max|x| / 127,
// q = round_to_nearest_even(x / d) in [-127, 127]; QuantizeActivationsQ8Ref), so decode and
// prefill see the same activation rounding. Weights enter as u = w + o (Q4_0: the raw nibble,
// o = 8; Q8_0: the byte xor 0x80, o = 128) and the offset cancels through integer corrections
// -o · sum(q) that start the accumulators. Four blocks at a time: one byte permute (vpermt2b)
// gathers their 16-byte halves out of the 18/34-byte blocks into one zmm, each 128-bit lane
// one block, and every int32 lane holds an exact partial sum of 8 products of one block, which
// is converted and scaled by that block's d_w · d_x in f32.
//
// With a QuantInterleaved copy in MatrixView::prepared (made at load) it takes a faster path: 16
// rows per vector, one int32 lane per row (quant_interleaved.h), ~2x less vector work per byte.
// Its sums run in block order per row, so it is bit-identical to MatMulInt8Ref. Q4_K weights
// take this path too (their 32-element sub-blocks as blocks, with mins; AVX2 kernel only).
//
// Numerics: identical integers and per-block scale products to MatMulInt8Ref(w, x, 1, y);
// only the f32 summation order differs, so
//   |y - MatMulInt8Ref| <= ~K/8 · 2^-24 · sum_b |isum_b · d_w,b · d_x,b|
// and against the exact product the MatMulInt8 bound holds (activation rounding, half a step
// of each block's x). The result does not depend on the thread count.
//
// Owns nothing; pure functions. Thread-safe per pool (one ParallelFor caller at a time).
#pragma once

#include "base/thread_pool.h"
#include "kernels/cpu_features.h"
#include "kernels/ops.h"
#include "tensor/dtype.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// Weight types MatVecInt8 handles: Q8_0, Q4_0.
bool IsInt8MatVecType(DType type);

// True when the AVX-512 VNNI/VBMI/GFNI kernels run now: the CPU has them and the active ISA
// level is avx512 or above (cpu_features.h; TARMAC_ISA / ScopedIsa lower it). Then MatVecInt8
// also reads the GGUF layout at full speed (without it, a matrix without an interleaved copy
// goes through MatMulInt8).
bool Int8MatVecFast();

// True when the interleaved products run now (x86 with the active level avx2 or above): the
// pass dispatch.h's InterleavedPass names for the type and token count (the AVX-512 kernel, or
// the AVX2 one with AVX-VNNI where the CPU has it and the level allows; matvec_int8_avx2.h).
// Same results either way (bit-identical to MatMulInt8Ref). MatMul uses them for
// 1..kInterleavedMaxTokens tokens of a matrix with an interleaved copy.
bool InterleavedInt8Available();

// y[r] = row r · x with int8 activations. x: w.cols floats; y: w.rows floats (no aliasing).
// Without the VNNI path it computes the same function through MatMulInt8 (slower).
// Preconditions: IsInt8MatVecType(w.type), or w has a QuantInterleaved copy (which Q4_K
// matrices may have too); w.cols a multiple of the block size. pool may be nullptr.
void MatVecInt8(const MatrixView& w, const float* x, float* y, ThreadPool* pool);

// Tokens the interleaved products take in one call (decode batches, speculative verification):
// up to 8 share each pass over the weights, so 2-8 tokens stream the matrix once (MatMulInt8
// would pack slabs of it per call), 9-16 twice.
constexpr int64_t kInterleavedMaxTokens = 16;

// Products of 1..4 matrices with the same x rows (a layer's Q/K/V, or gate/up; or one matrix)
// in one call: x is quantized once and one parallel region covers all the matrices' rows, so
// the threads' weight streams restart less often. Possible when CanFuseMatVecInt8: all with
// QuantInterleaved copies (Q8_0, Q4_0 or Q4_K), of one type and width, and
// InterleavedInt8Available(). Per token
// the results equal MatVecInt8 (bit-identical to MatMulInt8Ref).
bool CanFuseMatVecInt8(const MatrixView* const* ws, int n);
// x: n_tokens rows of ws[0]->cols floats; ys[i]: n_tokens rows of ws[i]->rows floats each.
// Preconditions: CanFuseMatVecInt8(ws, n); 1 <= n_tokens <= kInterleavedMaxTokens.
void MatVecInt8Fused(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tokens, ThreadPool* pool);

// A feed-forward block's gated products: gate = act(w_gate · x) ⊙ (w_up · x), act as kind says
// (ApplyGlu), up left holding w_up · x. Each parallel chunk is one range of row groups of
// both matrices, and the thread that computed them applies act to those rows at once: no
// serial pass over the rows after the products, nor the other core's rows to fetch. One token
// walks gate's group g and up's group g as its two weight streams, so a chunk is one segment
// of each matrix. Per token the values equal MatVecInt8Fused of the pair followed by ApplyGlu
// (act is elementwise).
// x: [n_tokens][cols]; gate, up: [n_tokens][rows], aliasing neither x nor each other.
// Preconditions: CanFuseMatVecInt8 of the pair; equal rows; 1 <= n_tokens <=
// kInterleavedMaxTokens.
void MatVecInt8Glu(const MatrixView& w_gate, const MatrixView& w_up, const float* x,
                   int64_t n_tokens, GluKind kind, float* gate, float* up, ThreadPool* pool);

namespace mv8_internal {
// MatVecInt8Fused (glu: MatVecInt8Glu of ws[0], ws[1]) on a pass other than InterleavedPass's
// choice (tests: every pass this CPU runs stays covered whichever one the dispatch picks).
// Preconditions: those functions'; pass kAvx2, kAvx2Vnni on a CPU with AVX-VNNI, or kAvx512
// where Int8MatVecFast() (not Q4_K).
void InterleavedProductsOnPass(const MatrixView* const* ws, float* const* ys, int n,
                               const float* x, int64_t n_tokens, Isa pass, ThreadPool* pool,
                               const GluKind* glu = nullptr);
}  // namespace mv8_internal

}  // namespace tarmac::kernels
