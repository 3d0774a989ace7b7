// AMX building blocks of the prefill attention tile (attention.cc runs the online softmax
// between them). A tile of nq query tokens × G heads of one KV group is R = nq·G query rows;
// per chunk of 64 keys the scores S = Q·Kᵀ and the update O += P·V are tile products.
//
// Precision: as in MatMulAmx (matmul_amx.h), every operand is split into hi + lo bf16 and
// three products are summed (hi·hi + lo·hi + hi·lo). f16 K and V split exactly; Q and P
// (f32) leave at most 2^-16 of each value, so a score is off by at most ~3·2^-16 of
// sum_d |q_d k_d| and an output by ~3·2^-16 of sum_j p_j |v_j| (both f32-accumulated).
//
// Layouts (all caller-owned, 64-byte aligned; Rp = R rounded up to 16, hd = head_dim):
//   Q, P split (AmxSplitRows, matmul_amx.h): row-major bf16, [Rp][hd] and [Rp][64].
//   K tiles: [key tile 0..3][hd / 32 steps][16 dim pairs][16 keys][2] bf16, hi and lo.
//   V tiles: [2 key steps][hd / 16 dim tiles][16 key pairs][16 dims][2] bf16, hi and lo.
//   S: [Rp][64] f32. O: [Rp][hd] f32.
// Pure functions; thread-safe. Preconditions: AmxBf16Available(); hd a multiple of 32.
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace tarmac::kernels {

// Whether the AMX tile path serves this tile: AMX enabled (AmxEnabled()), f16 K/V,
// head_dim a multiple of 32 up to 256, block size 16, 32 or 64, and at least 16 query rows
// (nq · group) in more than one token (decode keeps its register-blocked path).
bool AttentionAmxUsable(int32_t nq, int32_t group, const PagedKvView& kv);

// K and V of one chunk: blocks[0 .. n_blocks) of KV head `head` (64 / block_size blocks at
// most); keys at or beyond valid_keys are staged as zero (never read from the cache).
void AmxStageKv(const PagedKvView& kv, int32_t head, const int32_t* blocks, int32_t n_blocks,
                int32_t valid_keys, uint16_t* k_hi, uint16_t* k_lo, uint16_t* v_hi,
                uint16_t* v_lo);

// AmxScores and AmxAccumulate run on the calling thread's tiles: the caller configures them
// once per attention tile (AmxConfigureTiles(), matmul_amx.h) and releases them after.

// S = Q · Kᵀ for the chunk's 64 keys, unscaled: r_tiles row tiles of 16.
void AmxScores(const uint16_t* q_hi, const uint16_t* q_lo, int64_t r_tiles, int32_t head_dim,
               const uint16_t* k_hi, const uint16_t* k_lo, float* s);

// The online-softmax step of one chunk (keys key0 .. key0 + 63) for rows [0, rp): scales S by
// `scale` (and soft-caps it, variant.softcap), masks the keys row r may not see (row r is
// token r / group at position pos0 + r / group: keys after it, and before
// variant.FirstKey(position); rows >= n_rows see none), raises the running maxima m [rp] (-inf before
// the first chunk), scales the running sums l [rp] and the output rows O [rp][head_dim] by
// exp(m_old - m_new), adds the chunk's sums of p = exp(s - m_new) to l and writes P split
// ([rp][64] bf16 hi and lo) for AmxAccumulate. Overwrites S. Preconditions: rp a multiple of
// 16, n_rows <= rp, head_dim a multiple of 16.
void AmxSoftmaxChunk(float* s, int64_t rp, int64_t n_rows, int32_t group, int64_t pos0,
                     int64_t key0, float scale, int32_t head_dim, float* m, float* l, float* o,
                     uint16_t* p_hi, uint16_t* p_lo, const AttentionVariant& variant = {});

// O += P · V for the chunk (P split, [Rp][64]).
void AmxAccumulate(const uint16_t* p_hi, const uint16_t* p_lo, int64_t r_tiles,
                   int32_t head_dim, const uint16_t* v_hi, const uint16_t* v_lo, float* o);

}  // namespace tarmac::kernels
