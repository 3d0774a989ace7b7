// MatMulAmx: the prefill / batched-decode GEMM on Intel AMX tiles (Sapphire Rapids and later),
// for weights that are not on the int8 path (F16, BF16, F32, and any dtype MatMul dequantizes).
//
// AMX multiplies bf16 pairs into f32 tiles (TDPBF16PS: a 16×32 by 32×16 product per
// instruction, ~16× the FMA rate of AVX-512 per core). bf16 alone would cost accuracy (8-bit
// mantissa), so every operand is split exactly into two bf16 terms, v = hi + lo, and three
// products are summed: w_hi·x_hi + w_hi·x_lo + w_lo·x_hi. bf16 rounding (8 significant bits,
// RNE) leaves |v_lo| <= 2^-8·|v| and a remainder v - hi - lo <= 2^-16·|v|, so the dropped
// w_lo·x_lo and the remainders add at most 3·2^-16 ≈ 4.6e-5 of sum_k |w_k x_k| (2·2^-16 for
// F16/BF16 weights, whose split is exact), plus f32 accumulation; random data sees ~1e-5.
// Tests check 5e-5 (MatMul's own bound is 1e-4). BF16 weights have lo = 0 and skip that pass.
//
// Layout without pre-split weights: weights are tile A (16 weight rows × 32 k, their natural
// row-major order, converted per call into a per-thread buffer); activations are tile B
// (32 k × 16 tokens in the pair layout AMX wants, built once per call with gathers); each C
// tile is 16 weight rows × 16 tokens, written transposed into y. With AmxPackedMatrix, the
// other way round (below).
//
// Scratch (thread-local to the calling thread, kept for reuse): the split activations, at most
// ~32 MiB (a pass takes fewer tokens beyond that), and, when K is split into chunks, C
// accumulators of rows × pass tokens floats (the size of y); per pool thread, one row block
// of split weights.
// Owns nothing; pure function; writes only y. Thread-safe per pool (one caller at a time).
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "kernels/amx_packed_matrix.h"
#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// True when the CPU runs the amx level (cpu_features.h: AMX-TILE/BF16/INT8, AVX512-BF16, and
// the kernel granted this process the tile state). Probed once.
bool AmxBf16Available();

// Whether the kernels use AMX now: the active ISA level is amx (TARMAC_ISA / ScopedIsa lower
// it to compare paths).
bool AmxEnabled();

// The tile configuration every AMX kernel here uses (palette 1, all 8 tiles 16 rows × 64
// bytes), or tiles 0-7 with the given rows and bytes per row, loaded on / released from the
// calling thread. Precondition: AmxBf16Available().
void AmxConfigureTiles();
void AmxConfigureTiles(const uint8_t rows[8], const uint16_t colsb[8]);
void AmxReleaseTiles();

// src (n f32, n a multiple of 32) -> hi = RNE(v), lo = RNE(v - hi), both bf16, same order: the
// split every split-bf16 product here uses. Precondition: AmxBf16Available().
void AmxSplitRows(const float* src, int64_t n, uint16_t* hi, uint16_t* lo);

// Fewest tokens MatMul runs on AMX tiles with pre-split weights, and without (matmul.cc).
constexpr int64_t kAmxPackedMinTokens = 7;
constexpr int64_t kAmxPlainMinTokens = 17;  // past MatVecMulti's 16

// Several pre-split matrices of one width times the same x in one call (a layer's Q/K/V, or
// gate/up): x is split once per pass and one parallel region covers all their row blocks.
// Possible when CanShareMatMulAmx: 1..4 matrices, each with a matching AmxPackedMatrix copy
// (MatrixView::prepared), none int8, all with the same cols, and AmxEnabled(). Results equal
// MatMulAmx per matrix. x: [n_tokens][cols]; ys[i]: [n_tokens][ws[i]->rows].
bool CanShareMatMulAmx(const MatrixView* const* ws, int n);
void MatMulAmxShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tokens, ThreadPool* pool);

// Same contract as MatMul (matmul.h). Uses w's AmxPackedMatrix copy when it has one.
// Preconditions: AmxBf16Available(); IsMatVecType(w.type); n_tokens >= 1.
void MatMulAmx(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

}  // namespace tarmac::kernels
