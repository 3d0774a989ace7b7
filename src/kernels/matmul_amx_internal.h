// What the AMX GEMM's files lend each other: the tile geometry and the staging of weights into
// split, tile-ordered bf16 (matmul_amx.cc, for amx_packed_matrix.cc), and the pre-split path
// (matmul_amx_packed.cc, for MatMulAmx). Internal to the kernels module.
//
// The functions run AVX-512/AMX code: call them only after AmxBf16Available().
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/view.h"

namespace tarmac::kernels::amx_internal {

constexpr int64_t kKStep = 32;     // k per tile (16 bf16 pairs)
constexpr int64_t kRowBlock = 32;  // weight rows per block: 2 tiles of 16

// Rows [r0, r1) of w (a block of kRowBlock rows; rows past r1 and k past K zero), K steps
// [0, steps), split into hi and lo, each [steps][2 row tiles][16 rows][32 k] bf16. lo needs
// room for bf16 weights too (their padding rows are written). row: scratch of steps · kKStep
// floats.
void StageWeightBlock(const MatrixView& w, int64_t r0, int64_t r1, int64_t steps, uint16_t* hi,
                      uint16_t* lo, float* row);
// Each of `tiles` 1 KiB tiles transposed in place as 16×16 u32 (rows × k pairs -> k pairs ×
// rows: AMX's B layout).
void TransposeWeightTiles(uint32_t* t, int64_t tiles);

// MatMulAmx for a matrix with a pre-split copy in MatrixView::prepared (matmul_amx_packed.cc).
void MatMulAmxPackedOne(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                        ThreadPool* pool);

}  // namespace tarmac::kernels::amx_internal
