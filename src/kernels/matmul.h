// MatMul: a weight matrix (any matvec dtype) times a batch of f32 activation rows — the
// prefill kernel, where each weight is reused across all tokens so the work is compute-bound.
//
// Structure: threads take blocks of weight rows; for each K block, the weight tile is
// dequantized (kernels::DequantizeRow) and packed once into f32 panels of 2 SIMD vectors of
// rows, then a register-blocked micro-kernel accumulates MR tokens × 2 vectors of rows with
// broadcast-FMA over k (MR = 12 on AVX-512, 6 on AVX2), amortizing the dequantization over
// all tokens.
//
// Which kernel runs is the dispatch table's choice (dispatch.h, at the ISA level of
// cpu_features.h; `tarmac info` prints it); in short: Q8_0, Q4_0 and Q4_K weights with
// n_tokens >= 2 go to MatMulInt8 instead (matmul_int8.h: 8-bit
// activations per 32-block, integer dot products; its own, looser error bound), or, for
// Q8_0/Q4_0 with an interleaved copy and up to kInterleavedMaxTokens tokens, to
// MatVecInt8Fused (matvec_int8.h, same integers). Other dtypes run on AMX tiles where the CPU
// has them (matmul_amx.h: split-bf16 products, error <= 4.6e-5 · sum_k |w_k x_k|) from 7
// tokens with pre-split weights and from 17 without (below that, MatVecMulti).
//
// Owns nothing; pure function. Writes only y. Thread-safe per pool (one ParallelFor caller
// at a time). Numerics: dequantized weights are exact (== DequantizeRowRef), products are
// accumulated in f32 in k order, so |y - MatMulRef| <= ~K · 2^-24 · sum_k |w_k x_k| (in
// practice far less); tests check 1e-4 · sum_k |w_k x_k| for K up to ~4.4k.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// x: [n_tokens][w.cols] row-major f32; y: [n_tokens][w.rows] row-major f32 (must not alias x).
// y[t][r] = sum_k value(w.row(r))[k] * x[t][k]. n_tokens == 1 runs MatVec (MatVecInt8 for
// Q8_0/Q4_0 on the VNNI path or with an interleaved copy).
// Preconditions: IsMatVecType(w.type); n_tokens >= 0; w.cols a multiple of the block size.
// pool may be nullptr (single thread).
void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// Rows per parallel block of a GEMM over panels of panel_rows rows (the f32 panels, the int8
// and Q6_K slabs): up to 4 panels (x reuse across them), fewer when that would leave a thread
// under ~4 blocks (small matrices would leave a thread idle at the end).
// Preconditions: rows >= 0, panel_rows >= 1, threads >= 1.
int64_t GemmRowBlock(int64_t rows, int64_t panel_rows, int threads);

// MatMul's f32-panel GEMM alone (the dispatch table's matmul-panels; tests and benchmarks call
// it directly). Same contract as MatMul. Reads w's PanelPackedMatrix copy instead of packing
// panels per call when it has one of MatMulPanelWidth() (the same values: same results).
void MatMulPanels(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool* pool);

// Several matrices of one width times the same x (a layer's Q/K/V, or gate/up): the fused
// form of the dispatch table's kernel where it has one (interleaved int8 products, AMX with
// pre-split weights, f32 panels, MatVec for one dtype, MatVecMulti: x prepared once, one
// parallel region for all the matrices' rows), else MatMul per matrix. Per matrix the results
// equal MatMul's.
// x: [n_tokens][cols]; ys[i]: [n_tokens][ws[i]->rows], none aliasing x.
// Preconditions: n >= 1; all ws[i]->cols equal; each matrix meets MatMul's preconditions.
void MatMulShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                  int64_t n_tokens, ThreadPool* pool);

// A feed-forward block's gated input: gate = act(w_gate · x) ⊙ (w_up · x) (ApplyGlu of kind),
// up left holding w_up · x. Where the pair takes the interleaved int8 products it runs
// MatVecInt8Glu (the activation applied per chunk by the thread that computed its rows);
// otherwise MatMulShared of the pair, then the activation over the rows (split over the pool
// from 16 tokens). The same values either way.
// x: [n_tokens][cols]; gate, up: [n_tokens][rows], aliasing neither x nor each other.
// Preconditions: w_gate and w_up of one shape, each meeting MatMul's preconditions.
void MatMulGlu(const MatrixView& w_gate, const MatrixView& w_up, const float* x,
               int64_t n_tokens, GluKind kind, float* gate, float* up, ThreadPool* pool);

// MatMulPanels over 1..4 matrices of one width in one parallel region (MatMulShared's f32
// panel form; blocks of GemmRowBlock(their total rows)). Per matrix equal to MatMulPanels.
void MatMulPanelsShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                        int64_t n_tokens, ThreadPool* pool);

// The rows per f32 panel of MatMulPanels at the Highway target in use now (2 vectors): the
// width a PanelPackedMatrix must have to be read (panel_packed_matrix.h).
int64_t MatMulPanelWidth();

// The Highway target MatMul's dynamic dispatch uses now (cached after the first call, unlike
// hwy::SupportedTargets(), which runs CPUID, slow in a VM (bench/NOTES.md); follows
// hwy::SetSupportedTargetsForTest). MatMulInt8 picks its code path from it.
int64_t MatMulHwyTarget();

// Scalar reference: dequantizes with DequantizeRowRef, accumulates in double.
void MatMulRef(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

}  // namespace tarmac::kernels
