// The int8 GEMM's paths (matmul_int8.cc): the slab layout, the per-path function types and
// the Path table that MatMulInt8 drives; the x86 paths live in matmul_int8_x86.cc. Internal to
// the kernels module.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/matmul_int8_amx.h"
#include "kernels/quant_interleaved.h"
#include "tensor/quant_blocks.h"
#include "tensor/view.h"

namespace tarmac::kernels::int8_internal {

constexpr int64_t kQB = 32;          // activation / weight block
constexpr int64_t kSlabRows = 16;    // rows per packed slab (one zmm of int32 lanes)
// Per block: [8 k-groups][16 rows][4 k] bytes, 16 f32 scales, 16 f32 mins (Q4_K only); the
// AMX-INT8 tile reads the same slabs (matmul_int8_amx.h).
constexpr int64_t kQuantBytes = kInt8SlabQuantBytes;
constexpr int64_t kMinsOff = kInt8SlabMinsOff;
constexpr int64_t kBlockBytes = kInt8SlabBlockBytes;
static_assert(kQuantBytes == 8 * kSlabRows * 4 && kMinsOff == kQuantBytes + kSlabRows * 4);
// Below this block max|x| the block is treated as zero (1/d would overflow).
constexpr float kTinyAmax = 0x1p-100f;

// Bytes per weight block of the type's own layout (a Q4_K super-block covers 8 of our blocks).
inline int64_t WeightBlockBytes(DType t) {
  return t == DType::kQ8_0 ? int64_t{sizeof(BlockQ8_0)}
         : t == DType::kQ4_0 ? int64_t{sizeof(BlockQ4_0)} : int64_t{sizeof(BlockQ4_K)};
}

// Per-path micro-kernel over one panel (nv slabs) and m tokens:
// c[t][0..16·nv) (+)= sum over blocks of the panel's chunk. Tiles with mins (Q4_K) also
// subtract min_r · s_t per block.
using TileFn = void (*)(const uint8_t* wp, int64_t slab_stride, int64_t nbk, const int8_t* xq,
                        int64_t ldx, const float* xd, const int32_t* xc, const float* xs,
                        int64_t ldb, int offset, float* c, int64_t ldc, bool load_c);
using QuantFn = void (*)(const float* x, int64_t n, int offset, int8_t* q, float* d,
                         int32_t* corr, float* s);
using PackFn = void (*)(const MatrixView& w, int64_t r0, int64_t b0, int64_t nbk, uint8_t* dst);
using PackInterleavedFn = void (*)(const QuantInterleaved& pk, int64_t g, int64_t b0, int64_t nbk,
                                   uint8_t* dst);

struct Path {
  const char* name;
  int mr;  // tokens per tile
  int nv;  // slabs per tile
  const TileFn* tiles;       // [mr], tiles[m - 1] for m tokens
  const TileFn* tiles_mins;  // the same with Q4_K mins
  QuantFn quant;
  PackFn pack_full;  // full 16-row slab; nullptr: use the scalar packer
  PackInterleavedFn pack_interleaved;  // a slab from a QuantInterleaved copy
  void (*begin)() = nullptr;  // around a thread's run of tiles (AMX: the tile configuration)
  void (*end)() = nullptr;
  bool pad_tokens = false;    // tiles read whole groups of mr token rows (zeros past the end)
  // d/corr/s in groups of mr tokens, [group][block][mr] (token t0 + i's value of block b at
  // [b·mr + i] from the tile's pointers), instead of [token][block].
  bool acts_by_group = false;
  // After packing, slabs of types with an offset are made signed (AmxInt8SignSlabs).
  void (*sign_slabs)(uint8_t* slabs, int64_t n_blocks, int offset) = nullptr;
};

// Scalar pieces (matmul_int8.cc), which the x86 paths reuse where they have nothing better.
void QuantizeRowScalar(const float* x, int64_t n, int offset, int8_t* q, float* d,
                       int32_t* corr, float* s);
void PackSlabFullScalar(const MatrixView& w, int64_t r0, int64_t b0, int64_t nbk, uint8_t* dst);
void PackSlabInterleaved(const QuantInterleaved& pk, int64_t g, int64_t b0, int64_t nbk,
                         uint8_t* dst);
// A Q4_K slab block's 16 f32 scales and mins from the copy's super-block scales (block b).
void PackSlabScalesMinsQ4_K(const QuantInterleaved& pk, int64_t g, int64_t b, uint8_t* db);

// The x86 path of a level (AMX-INT8, AVX-512 VNNI, AVX-VNNI where the CPU has it, AVX2);
// nullptr for scalar (or not x86): the scalar path. Precondition: CpuSupports(isa).
const Path* BestX86Path(Isa isa);

}  // namespace tarmac::kernels::int8_internal
