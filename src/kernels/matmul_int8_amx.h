// The AMX-INT8 micro-kernel of MatMulInt8 (matmul_int8.h), for prefill and decode batches on
// CPUs with AMX: 16 tokens × one 16-row slab per tile product instead of VNNI's 6 × 32.
//
// A slab block ([8 k-groups][16 rows][4 k] bytes) is already an AMX B tile (8 rows of 64
// bytes), and the tokens' int8 activations of a block are an A tile (16 rows of 32 bytes): one
// tile product gives every token × row integer sum of the block exactly. Q8_0/Q4_0 slabs are
// made signed first (AmxInt8SignSlabs: TDPBSSD, the sum is w · q itself); Q4_K's nibbles stay
// unsigned with offset 0 (TDPBSUD). The f32 epilogue is the VNNI kernel's, per output and block
// in block order:
//   acc = fma(float(isum), d_w · d_x, acc)   (Q4_K then acc -= min · s_x)
// so the results are bit-identical to MatMulInt8Ref, as on every path. The epilogue (a
// convert, a multiply and an fma per 16 outputs and block) bounds it, so its lead over the
// VNNI kernel is much smaller in a whole GEMM than in isolation (bench/NOTES.md).
//
// Internal to the kernels module. Pure functions; thread-safe (tile state is per thread and
// released before returning).
#pragma once

#include <cstdint>

namespace tarmac::kernels {

// Slab layout shared with matmul_int8.cc: per 32-column block, 512 quant bytes, the 16 f32 row
// scales, then (Q4_K) the 16 f32 mins.
constexpr int64_t kInt8SlabQuantBytes = 512;
constexpr int64_t kInt8SlabMinsOff = kInt8SlabQuantBytes + 16 * 4;
constexpr int64_t kInt8SlabBlockBytes = kInt8SlabMinsOff + 16 * 4;

// Tokens per AMX tile (rows of A and C).
constexpr int kAmxInt8MR = 16;

// True when the active ISA level is amx (cpu_features.h: the CPU has AMX-INT8 and the OS
// granted the tile state).
bool AmxInt8Usable();

// Load / release the tile configuration TileAmxInt8 uses, on the calling thread, around a run
// of TileAmxInt8 calls (loading it per call stalls the tiles; bench/NOTES.md); no other
// AMX kernel may run on the thread in between. Precondition: AmxInt8Usable().
void AmxInt8Begin();
void AmxInt8End();

// Makes packed slabs signed for the tile product: each quant byte u becomes u - offset as an
// int8 (Q8_0: the weight itself, offset 128; Q4_0: nibble - 8). The integer sum of a block is
// then w · q directly (= the unsigned sum plus MatMulInt8's correction -offset · sum q), so
// the epilogue needs no correction. Q4_K (offset 0) stays unsigned.
void AmxInt8SignSlabs(uint8_t* slabs, int64_t n_blocks, int offset);

// One slab (16 rows, nbk blocks at wp, kInt8SlabBlockBytes apart; signed by AmxInt8SignSlabs
// unless mins) times m tokens (1..16): xq: token i's quants of the chunk at xq + i·ldx (32 per
// block); the tile always reads 16 token rows, so rows m..15 must be readable (their products
// are not used). xd/xs: the block scales / sums in group layout, token i's of block b at
// [b·16 + i]. c: token i's 16 outputs at c + i·ldc, added to when load_c. mins: Q4_K
// (subtract min · s_x per block). Precondition: between AmxInt8Begin and AmxInt8End on this
// thread.
void TileAmxInt8(int m, bool mins, const uint8_t* wp, int64_t nbk, const int8_t* xq, int64_t ldx,
                 const float* xd, const float* xs, float* c, int64_t ldc, bool load_c);

}  // namespace tarmac::kernels
