// AMX-INT8 micro-kernel of MatMulInt8 (see matmul_int8_amx.h). Only the TARMAC_AMX8
// functions use AMX/AVX-512, and they run only after AmxInt8Usable() said yes.

#include "kernels/matmul_int8_amx.h"

#include "kernels/x86_intrinsics.h"  // <immintrin.h>

#include <array>
#include <utility>

#include "base/check.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_amx.h"

namespace tarmac::kernels {
namespace {

#define TARMAC_AMX8                                                                        \
  __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni," \
                        "fma,f16c")))

// Tiles: 0-3 C (M × 16 int32, four blocks in flight), 4-5 A (M tokens × 32 bytes), 6-7 B
// (8 rows × 64 bytes); A and B alternate so a load need not wait for the previous product.
void Configure() {
  static constexpr uint8_t kRows[8] = {16, 16, 16, 16, 16, 16, 8, 8};
  static constexpr uint16_t kColsb[8] = {64, 64, 64, 64, 32, 32, 64, 64};
  AmxConfigureTiles(kRows, kColsb);
}

// C tile j = block j's tokens × rows integer sums. The _tile_* intrinsics take their tile
// numbers as literals (they are pasted into the instruction), hence the macro. A and B tiles
// alternate between even and odd j so a load need not wait for the previous product.
#define TARMAC_AMX8_BLOCK(C, A, B, SIGNED, a, lda, b) \
  do {                                                \
    _tile_zero(C);                                    \
    _tile_loadd(A, a, lda);                           \
    _tile_loadd(B, b, 64);                            \
    if (SIGNED) {                                     \
      _tile_dpbssd(C, A, B);                          \
    } else {                                          \
      _tile_dpbsud(C, A, B);                          \
    }                                                 \
  } while (0)

// Blocks [b0, b0 + n) (n <= 4) into C tiles 0..n-1, then stored to sums[j] (16 × 16 int32).
template <bool kSignedW>
TARMAC_AMX8 __attribute__((always_inline)) inline void IssueGroup(
    const uint8_t* wp, int64_t b0, int n, const int8_t* xq, int64_t ldx,
    int32_t (*sums)[16 * 16]) {
  const int8_t* a = xq + b0 * 32;
  const uint8_t* w = wp + b0 * kInt8SlabBlockBytes;
  TARMAC_AMX8_BLOCK(0, 4, 6, kSignedW, a, ldx, w);
  if (n > 1) TARMAC_AMX8_BLOCK(1, 5, 7, kSignedW, a + 32, ldx, w + kInt8SlabBlockBytes);
  if (n > 2) TARMAC_AMX8_BLOCK(2, 4, 6, kSignedW, a + 64, ldx, w + 2 * kInt8SlabBlockBytes);
  if (n > 3) TARMAC_AMX8_BLOCK(3, 5, 7, kSignedW, a + 96, ldx, w + 3 * kInt8SlabBlockBytes);
  _tile_stored(0, sums[0], 64);
  if (n > 1) _tile_stored(1, sums[1], 64);
  if (n > 2) _tile_stored(2, sums[2], 64);
  if (n > 3) _tile_stored(3, sums[3], 64);
}

// The f32 epilogue of block b: acc[i] = fma(float(isum), d_w · d_x, acc[i]) (then the Q4_K
// mins), the reference's operations in its order; isum is the exact w · q (signed slabs) or,
// for Q4_K, u · q with offset 0, both equal to the reference's corrected integer.
template <int M, bool kMins>
TARMAC_AMX8 __attribute__((always_inline)) inline void Epilogue(const int32_t* sums,
                                                                const uint8_t* wb, int64_t b,
                                                                const float* xd, const float* xs,
                                                                __m512* acc) {
  const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(wb + kInt8SlabQuantBytes));
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    const __m512i isum = _mm512_load_si512(sums + 16 * i);  // already w · q: no correction
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(xd[b * 16 + i]));
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[i]);
  }
  if constexpr (kMins) {
    const __m512 mn = _mm512_load_ps(reinterpret_cast<const float*>(wb + kInt8SlabMinsOff));
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) acc[i] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(xs[b * 16 + i]), acc[i]);
  }
}

// Blocks go through in groups of 4 (one per C tile), software-pipelined: the tiles compute
// and store group g + 1 while the vector units run group g's epilogue from the other half of
// a double buffer (storing a tile and loading it straight back stalled the loop).
template <int M, bool kMins>
TARMAC_AMX8 void Tile(const uint8_t* wp, int64_t nbk, const int8_t* xq, int64_t ldx,
                      const float* xd, const float* xs, float* c, int64_t ldc, bool load_c) {
  __m512 acc[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) acc[i] = load_c ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
  alignas(64) int32_t sums[2][4][16 * 16];
  auto group = [nbk](int64_t b0) { return static_cast<int>(nbk - b0 < 4 ? nbk - b0 : 4); };
  // Q4_K (mins) keeps unsigned nibbles (offset 0); Q8_0/Q4_0 slabs were made signed.
  constexpr bool kSignedW = !kMins;
  if (nbk > 0) IssueGroup<kSignedW>(wp, 0, group(0), xq, ldx, sums[0]);
  for (int64_t b0 = 0, half = 0; b0 < nbk; b0 += 4, half ^= 1) {
    if (b0 + 4 < nbk) IssueGroup<kSignedW>(wp, b0 + 4, group(b0 + 4), xq, ldx, sums[half ^ 1]);
    const int n4 = group(b0);
    for (int j = 0; j < n4; ++j) {
      Epilogue<M, kMins>(sums[half][j], wp + (b0 + j) * kInt8SlabBlockBytes, b0 + j, xd, xs,
                         acc);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) _mm512_storeu_ps(c + i * ldc, acc[i]);
}

using TileFn = void (*)(const uint8_t*, int64_t, const int8_t*, int64_t, const float*,
                        const float*, float*, int64_t, bool);

template <bool kMins, int... Ms>
constexpr auto MakeTable(std::integer_sequence<int, Ms...>) {
  return std::array<TileFn, sizeof...(Ms)>{&Tile<Ms + 1, kMins>...};
}

TARMAC_AMX8 void SignSlabsImpl(uint8_t* slabs, int64_t n_blocks, int offset) {
  const __m512i o = _mm512_set1_epi8(static_cast<char>(offset));
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* q = slabs + b * kInt8SlabBlockBytes;
    for (int k = 0; k < kInt8SlabQuantBytes; k += 64) {
      _mm512_store_si512(q + k, _mm512_sub_epi8(_mm512_load_si512(q + k), o));
    }
  }
}

TARMAC_AMX8 void EndImpl() { _tile_release(); }

}  // namespace

bool AmxInt8Usable() { return IsaAtLeast(Isa::kAmx); }

void AmxInt8Begin() { Configure(); }
void AmxInt8End() { EndImpl(); }

void AmxInt8SignSlabs(uint8_t* slabs, int64_t n_blocks, int offset) {
  SignSlabsImpl(slabs, n_blocks, offset);
}

void TileAmxInt8(int m, bool mins, const uint8_t* wp, int64_t nbk, const int8_t* xq, int64_t ldx,
                 const float* xd, const float* xs, float* c, int64_t ldc, bool load_c) {
  static constexpr auto kPlain = MakeTable<false>(std::make_integer_sequence<int, kAmxInt8MR>());
  static constexpr auto kMins = MakeTable<true>(std::make_integer_sequence<int, kAmxInt8MR>());
  TARMAC_DCHECK(m >= 1 && m <= kAmxInt8MR);
  (mins ? kMins : kPlain)[m - 1](wp, nbk, xq, ldx, xd, xs, c, ldc, load_c);
}

}  // namespace tarmac::kernels
