// The tile geometry and small tile helpers shared by the AMX GEMM's two halves (matmul_amx.cc:
// weights split per call; matmul_amx_packed.cc: pre-split weights). Internal to the kernels
// module.
//
// Include only from translation units whose AMX code runs after AmxBf16Available() said yes:
// the functions are compiled for AMX/AVX-512 and have internal linkage, so no caller on another
// CPU can be linked to them. They use intrinsics and raw pointers only.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/amx_split-inl.h"
#include "kernels/matmul_amx_internal.h"

namespace tarmac::kernels {
namespace {

#define TARMAC_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

constexpr int64_t kKStep = 32;   // k per tile (16 bf16 pairs)
constexpr int64_t kTile = 16;    // rows / tokens per tile
constexpr int64_t kRowBlock = 32;  // weight rows per task: 2 A tiles
static_assert(kKStep == amx_internal::kKStep && kRowBlock == amx_internal::kRowBlock);
constexpr int64_t kTokPair = 32;   // tokens per pass: 2 B tiles

// v (f32, 32 values of which `valid` are real, the rest read as 0) -> hi + lo, both bf16,
// hi = RNE(v), lo = RNE(v - hi) (v - hi is exact in f32).
TARMAC_AMX inline void Split32(const float* v, int64_t valid, uint16_t* hi, uint16_t* lo) {
  const __mmask16 m0 = valid >= 16 ? 0xFFFF : (valid <= 0 ? 0 : (1u << valid) - 1);
  const int64_t v1 = valid - 16;
  const __mmask16 m1 = v1 >= 16 ? 0xFFFF : (v1 <= 0 ? 0 : (1u << v1) - 1);
  SplitBf16x32(_mm512_maskz_loadu_ps(m0, v), _mm512_maskz_loadu_ps(m1, v + 16), hi, lo);
}

// The 2×2 block both kernels accumulate: C tiles 0-3 += A tiles 4-5 times B tiles 6-7,
// tile 0 = (A4, B6), 1 = (A4, B7), 2 = (A5, B6), 3 = (A5, B7).
TARMAC_AMX inline void Products2x2() {
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

// Only the A-tile-4 half (C tiles 0 and 1) when `single`.
TARMAC_AMX inline void Products(bool single) {
  if (single) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
  } else {
    Products2x2();
  }
}

// C tiles 0-1 start at zero (first K chunk) or from the 1 KiB tiles c0, c1.
TARMAC_AMX inline void StartC2(bool first, const float* c0, const float* c1) {
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
  } else {
    _tile_loadd(0, c0, 64);
    _tile_loadd(1, c1, 64);
  }
}

// C tiles 0-3 start at zero (first K chunk) or from the 1 KiB tiles c0..c3.
TARMAC_AMX inline void StartC(bool first, const float* c0, const float* c1, const float* c2,
                              const float* c3) {
  StartC2(first, c0, c1);
  if (first) {
    _tile_zero(2);
    _tile_zero(3);
  } else {
    _tile_loadd(2, c2, 64);
    _tile_loadd(3, c3, 64);
  }
}

TARMAC_AMX inline void StoreTile(int idx, float* p, int64_t stride_bytes) {
  switch (idx) {
    case 0: _tile_stored(0, p, stride_bytes); break;
    case 1: _tile_stored(1, p, stride_bytes); break;
    case 2: _tile_stored(2, p, stride_bytes); break;
    default: _tile_stored(3, p, stride_bytes); break;
  }
}

// Tokens per pass: all of them while the staged activations stay under ~32 MiB (4 bytes per
// token and k), so each weight row is converted once per call in the common cases.
inline int64_t MaxPassTokens(int64_t K) {
  const int64_t kp = (K + kKStep - 1) / kKStep * kKStep;
  return std::max<int64_t>(kTokPair, (int64_t{32} << 20) / (4 * kp) / kTokPair * kTokPair);
}

}  // namespace
}  // namespace tarmac::kernels
