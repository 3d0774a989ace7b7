// The int8 GEMM's x86 paths (matmul_int8_paths.h): AVX-512 VNNI, AMX-INT8 (its tiles in
// matmul_int8_amx.cc) and AVX2. Intrinsics in functions with target attributes, chosen at run
// time by BestX86Path.

#include "kernels/matmul_int8_paths.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TARMAC_INT8_X86 1
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <limits>
#include <utility>

#include "hwy/targets.h"
#include "tensor/fp16.h"

#define TARMAC_TARGET_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
#define TARMAC_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TARMAC_TARGET_AVX2_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
// GCC 12's reduce/convert intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports falsely.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#else
#define TARMAC_INT8_X86 0
#endif

namespace tarmac::kernels::int8_internal {

#if TARMAC_INT8_X86
namespace {

// ------------------------------------------------------------------------------------------
// AVX-512 VNNI.

TARMAC_TARGET_VNNI void QuantizeRowAvx512(const float* x, int64_t n, int offset, int8_t* q,
                                          float* d, int32_t* corr, float* s) {
  for (int64_t b = 0; b < n / kQB; ++b) {
    const __m512 a = _mm512_loadu_ps(x + b * kQB);
    const __m512 c = _mm512_loadu_ps(x + b * kQB + 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(c)));
    int32_t sum = 0;
    if (nan != 0 || !(amax <= std::numeric_limits<float>::max())) {
      d[b] = std::numeric_limits<float>::quiet_NaN();
      std::memset(q + b * kQB, 0, kQB);
    } else if (amax < kTinyAmax) {
      d[b] = 0.0f;
      std::memset(q + b * kQB, 0, kQB);
    } else {
      const float db = amax / 127.0f;
      const __m512 id = _mm512_set1_ps(1.0f / db);
      d[b] = db;
      const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
      // cvtps rounds with MXCSR: to nearest even by default, as nearbyint in the scalar path.
      const __m512i qa = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(a, id)), lo), hi);
      const __m512i qc = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(c, id)), lo), hi);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQB), _mm512_cvtepi32_epi8(qa));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQB + 16), _mm512_cvtepi32_epi8(qc));
      sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qc));
    }
    corr[b] = -offset * sum;
    s[b] = d[b] * static_cast<float>(sum);
  }
}

// 16 bytes (4 dwords) at byte offset `off` of each of 16 rows, transposed: out[j] = dword j
// of rows 0..15. Each 128-bit lane L of z[i] holds row i + 4L, so a 4×4 dword transpose
// within lanes (unpack 32, unpack 64) leaves rows 0..15 in order.
TARMAC_TARGET_VNNI inline void Transpose16x4(const uint8_t* p, int64_t stride, __m512i out[4]) {
  __m512i z[4];
  for (int i = 0; i < 4; ++i) {
    const uint8_t* q = p + i * stride;
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 4 * stride)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 8 * stride)), 2);
    z[i] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 12 * stride)), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Full 16-row slab: quants by in-register transposes, the 16 f16 scales by one gather
// (requires 15 · row_stride < 2^31, checked by the caller).
TARMAC_TARGET_VNNI void PackSlabAvx512(const MatrixView& w, int64_t r0, int64_t b0, int64_t nbk,
                                       uint8_t* dst) {
  const int64_t st = w.row_stride;
  const __m512i vidx = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_set1_epi32(static_cast<int32_t>(st)));
  const int64_t bb = WeightBlockBytes(w.type);
  const __m512i flip = _mm512_set1_epi32(static_cast<int32_t>(0x80808080u));
  const __m512i low4 = _mm512_set1_epi32(0x0f0f0f0f);
  __m512i t[4];
  if (w.type == DType::kQ4_K) {
    // Sub-block j of a super-block: nibbles (low for even j, high for odd) of qs[32(j/2) ..].
    for (int64_t b = 0; b < nbk; ++b) {
      const int64_t sb = (b0 + b) / 8;
      const int j = static_cast<int>((b0 + b) % 8);
      const uint8_t* qs = w.row(r0) + sb * bb + offsetof(BlockQ4_K, qs) + 32 * (j / 2);
      uint8_t* db = dst + b * kBlockBytes;
      for (int h = 0; h < 2; ++h) {
        Transpose16x4(qs + 16 * h, st, t);
        for (int i = 0; i < 4; ++i) {
          const __m512i v = (j % 2 == 0) ? t[i] : _mm512_srli_epi32(t[i], 4);
          _mm512_store_si512(db + 64 * (4 * h + i), _mm512_and_si512(v, low4));
        }
      }
      for (int r = 0; r < kSlabRows; ++r) {
        const auto* blk = reinterpret_cast<const BlockQ4_K*>(w.row(r0 + r)) + sb;
        uint8_t sc, m;
        Q4KScaleMin(j, blk->scales, &sc, &m);
        const float dsc = F16ToF32(blk->d) * sc, mn = F16ToF32(blk->dmin) * m;
        std::memcpy(db + kQuantBytes + 4 * r, &dsc, 4);
        std::memcpy(db + kMinsOff + 4 * r, &mn, 4);
      }
    }
    return;
  }
  const uint8_t* base = w.row(r0) + b0 * bb;
  const bool q8 = w.type == DType::kQ8_0;
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* blk = base + b * bb;
    uint8_t* db = dst + b * kBlockBytes;
    if (q8) {
      for (int h = 0; h < 2; ++h) {  // k 16h .. 16h + 15
        Transpose16x4(blk + 2 + 16 * h, st, t);
        for (int j = 0; j < 4; ++j)
          _mm512_store_si512(db + 64 * (4 * h + j), _mm512_xor_si512(t[j], flip));
      }
    } else {
      Transpose16x4(blk + 2, st, t);
      for (int j = 0; j < 4; ++j) {
        _mm512_store_si512(db + 64 * j, _mm512_and_si512(t[j], low4));
        _mm512_store_si512(db + 64 * (j + 4), _mm512_and_si512(_mm512_srli_epi32(t[j], 4), low4));
      }
    }
    const __m512i s = _mm512_i32gather_epi32(vidx, blk, 1);
    _mm512_store_ps(db + kQuantBytes, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(s)));
  }
}

// Broadcast of an int32 from memory that the compiler may not merge with another: each
// accumulator starts from its own vpbroadcastd, a load-port uop, instead of a register copy
// that would take a vector ALU slot from vpdpbusd.
TARMAC_TARGET_VNNI inline __m512i BroadcastLoad(const int32_t* p) {
  __m512i r;
  asm volatile("vpbroadcastd %1, %0" : "=v"(r) : "m"(*p));
  return r;
}

constexpr int kVnniMR = 6;
constexpr int kVnniNV = 2;

template <int M, bool kMins>
TARMAC_TARGET_VNNI void TileVnni(const uint8_t* wp, int64_t slab_stride, int64_t nbk,
                                 const int8_t* xq, int64_t ldx, const float* xd,
                                 const int32_t* xc, const float* xs, int64_t ldb,
                                 int /*offset*/, float* c, int64_t ldc, bool load_c) {
  constexpr int NV = kVnniNV;
  __m512 acc[M][NV];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[m][v] = load_c ? _mm512_loadu_ps(c + m * ldc + 16 * v) : _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* wb = wp + b * kBlockBytes;
    const int8_t* xb = xq + b * kQB;
    __m512i ia[M][NV];
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) ia[m][v] = BroadcastLoad(xc + m * ldb + b);
    }
#pragma GCC unroll 8
    for (int k4 = 0; k4 < 8; ++k4) {
      __m512i wv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        wv[v] = _mm512_load_si512(wb + v * slab_stride + 64 * k4);
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m) {
        int32_t xi;
        std::memcpy(&xi, xb + m * ldx + 4 * k4, 4);
        const __m512i xv = _mm512_set1_epi32(xi);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) ia[m][v] = _mm512_dpbusd_epi32(ia[m][v], wv[v], xv);
      }
    }
    __m512 dw[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      dw[v] = _mm512_load_ps(reinterpret_cast<const float*>(wb + v * slab_stride + kQuantBytes));
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) {
      const __m512 dx = _mm512_set1_ps(xd[m * ldb + b]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[m][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[m][v]), _mm512_mul_ps(dw[v], dx), acc[m][v]);
    }
    if (kMins) {
      __m512 mn[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        mn[v] = _mm512_load_ps(reinterpret_cast<const float*>(wb + v * slab_stride + kMinsOff));
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m) {
        const __m512 sx = _mm512_set1_ps(xs[m * ldb + b]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_fnmadd_ps(mn[v], sx, acc[m][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + m * ldc + 16 * v, acc[m][v]);
  }
}

constexpr TileFn kVnniTiles[kVnniMR] = {&TileVnni<1, false>, &TileVnni<2, false>,
                                        &TileVnni<3, false>, &TileVnni<4, false>,
                                        &TileVnni<5, false>, &TileVnni<6, false>};
constexpr TileFn kVnniTilesMins[kVnniMR] = {&TileVnni<1, true>, &TileVnni<2, true>,
                                            &TileVnni<3, true>, &TileVnni<4, true>,
                                            &TileVnni<5, true>, &TileVnni<6, true>};
// PackSlabInterleaved with vector copies, nibble splits and scale conversions.
TARMAC_TARGET_VNNI void PackSlabInterleavedAvx512(const QuantInterleaved& pk, int64_t g, int64_t b0,
                                                  int64_t nbk, uint8_t* dst) {
  const bool q8 = pk.type() == DType::kQ8_0;
  const __m512i nib = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* db = dst + b * kBlockBytes;
    const uint8_t* q = pk.block_quants(g, b0 + b);
    for (int s = 0; s < 4; ++s) {
      const __m512i v = _mm512_load_si512(q + 64 * s);
      if (q8) {
        _mm512_storeu_si512(db + 64 * s, v);
        _mm512_storeu_si512(db + 256 + 64 * s, _mm512_load_si512(q + 256 + 64 * s));
      } else {
        _mm512_storeu_si512(db + 64 * s, _mm512_and_si512(v, nib));
        _mm512_storeu_si512(db + 256 + 64 * s, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
      }
    }
    if (pk.type() == DType::kQ4_K) {
      PackSlabScalesMinsQ4_K(pk, g, b0 + b, db);
      continue;
    }
    const __m256i h = _mm256_load_si256(
        reinterpret_cast<const __m256i*>(pk.block_scales(g, b0 + b)));
    _mm512_storeu_ps(db + kQuantBytes, _mm512_cvtph_ps(h));
    _mm512_storeu_ps(db + kMinsOff, _mm512_setzero_ps());
  }
}

constexpr Path kVnniPath{"avx512vnni", kVnniMR, kVnniNV, kVnniTiles, kVnniTilesMins,
                         &QuantizeRowAvx512, &PackSlabAvx512, &PackSlabInterleavedAvx512};

// AMX-INT8 (matmul_int8_amx.h): 16 tokens × one slab per tile, the VNNI path's quantizer and
// packers.
template <int M, bool kMins>
void TileAmx(const uint8_t* wp, int64_t /*slab_stride*/, int64_t nbk, const int8_t* xq,
             int64_t ldx, const float* xd, const int32_t* /*xc*/, const float* xs,
             int64_t /*ldb*/, int /*offset*/, float* c, int64_t ldc, bool load_c) {
  TileAmxInt8(M, kMins, wp, nbk, xq, ldx, xd, xs, c, ldc, load_c);
}
template <bool kMins, int... Ms>
constexpr std::array<TileFn, sizeof...(Ms)> AmxTiles(std::integer_sequence<int, Ms...>) {
  return {&TileAmx<Ms + 1, kMins>...};
}
constexpr auto kAmxTiles = AmxTiles<false>(std::make_integer_sequence<int, kAmxInt8MR>());
constexpr auto kAmxTilesMins = AmxTiles<true>(std::make_integer_sequence<int, kAmxInt8MR>());
constexpr Path kAmxPath{"amx-int8",         kAmxInt8MR,         1,
                        kAmxTiles.data(),   kAmxTilesMins.data(), &QuantizeRowAvx512,
                        &PackSlabAvx512,    &PackSlabInterleavedAvx512,
                        &AmxInt8Begin,      &AmxInt8End,        true,
                        true,               &AmxInt8SignSlabs};

// ------------------------------------------------------------------------------------------
// AVX2: one slab = 2 ymm of 8 rows (one int32 lane per row); int sums and f32 accumulators
// stay in registers over the chunk's blocks, MR = 6 tokens per tile.
//   Q4_0 / Q4_K: the packed bytes are unsigned nibbles u (0..15); vpmaddubsw(u, q) pairs are
//     at most 3810, so a block's 8 k-groups add up in int16 (<= 30480) before one vpmaddwd,
//     and the offset correction (corr = -offset · sum q) makes the sums the signed ones. Both
//     halves run together, 3 tokens at a time, so each activation broadcast serves two
//     vpmaddubsw (the loop is bound by its total uops here, loads included: bench/NOTES.md).
//   Q8_0: the slabs are made signed after packing (w itself, SignSlabsQ8Avx2) and each
//     k-group is vpmaddubsw(|w|, sign(q, w)): pairs at most 2·128·127 = 32512, widened to
//     int32 (vpmaddwd) at once, as two do not fit int16. No correction is needed. One half
//     at a time, all 6 tokens (|w| is computed once per k-group for all of them).
// The sums are exact, so the epilogue (and the results) are the other paths'.

// An empty asm that makes v live in a register here. GCC otherwise re-associates each int
// accumulator chain into a tree of all eight k-groups' products, which spilled most of them to
// the stack (measured: the old kernel stored and reloaded ~1 vector per vpmaddubsw).
#define TARMAC_PIN_YMM(v) asm("" : "+x"(v))

// The block's integer sums for tokens [0, M) into the accumulators: times the weights' and
// the tokens' scales, then (K-quants) minus the weights' mins times the tokens' sums. Shared
// by the AVX2 and AVX-VNNI halves (inlined into both; AVX2's target is a subset of VNNI's).
template <int M, bool kMins>
TARMAC_TARGET_AVX2 __attribute__((always_inline)) inline void ScaleBlockAvx2(
    const __m256i* isum, const uint8_t* wp, int64_t b, const float* xd, const float* xs,
    int64_t ldb, int h, __m256* acc) {
  const __m256 dw = _mm256_load_ps(reinterpret_cast<const float*>(wp + b * kBlockBytes +
                                                                  kQuantBytes + 32 * h));
  for (int m = 0; m < M; ++m) {
    const __m256 dx = _mm256_set1_ps(xd[m * ldb + b]);
    acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_mul_ps(dw, dx), acc[m]);
  }
  if (kMins) {
    const __m256 mn = _mm256_load_ps(reinterpret_cast<const float*>(wp + b * kBlockBytes +
                                                                    kMinsOff + 32 * h));
    for (int m = 0; m < M; ++m) acc[m] = _mm256_fnmadd_ps(mn, _mm256_set1_ps(xs[m * ldb + b]), acc[m]);
  }
}

// 4 activation bytes (one k-group of token m) in every int32 lane.
TARMAC_TARGET_AVX2 __attribute__((always_inline)) inline __m256i BroadcastQ(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// A slab's f32 accumulators for tokens [0, M), both 8-row halves: c's values (K blocks after
// the first) or zero, and back. Shared by the AVX2 and AVX-VNNI slab loops.
template <int M>
TARMAC_TARGET_AVX2 __attribute__((always_inline)) inline void LoadSlabAcc(const float* c, int64_t ldc, bool load_c,
                                                                       __m256 (&acc)[2][M]) {
  for (int h = 0; h < 2; ++h) {
    for (int m = 0; m < M; ++m) acc[h][m] = load_c ? _mm256_loadu_ps(c + m * ldc + 8 * h) : _mm256_setzero_ps();
  }
}
template <int M>
TARMAC_TARGET_AVX2 __attribute__((always_inline)) inline void StoreSlabAcc(const __m256 (&acc)[2][M], float* c,
                                                                        int64_t ldc) {
  for (int h = 0; h < 2; ++h) {
    for (int m = 0; m < M; ++m) _mm256_storeu_ps(c + m * ldc + 8 * h, acc[h][m]);
  }
}

// Both halves of the slab for tokens [0, M), nibble weights: each token's 4 activation bytes
// are broadcast once for the two halves (M <= 3 keeps the 4M accumulators in registers).
template <int M, bool kMins>
TARMAC_TARGET_AVX2 inline void SlabNibblesAvx2(const uint8_t* wp, int64_t nbk, const int8_t* xq,
                                               int64_t ldx, const float* xd, const int32_t* xc,
                                               const float* xs, int64_t ldb, float* c,
                                               int64_t ldc, bool load_c) {
  __m256 acc[2][M];
  LoadSlabAcc<M>(c, ldc, load_c, acc);
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* wb = wp + b * kBlockBytes;
    const int8_t* xb = xq + b * kQB;
    __m256i s16[2][M];
#pragma GCC unroll 8
    for (int k4 = 0; k4 < 8; ++k4) {
      const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 64 * k4));
      const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 64 * k4 + 32));
      for (int m = 0; m < M; ++m) {
        const __m256i x = BroadcastQ(xb + m * ldx + 4 * k4);
        const __m256i p0 = _mm256_maddubs_epi16(w0, x), p1 = _mm256_maddubs_epi16(w1, x);
        s16[0][m] = k4 == 0 ? p0 : _mm256_add_epi16(s16[0][m], p0);
        s16[1][m] = k4 == 0 ? p1 : _mm256_add_epi16(s16[1][m], p1);
        TARMAC_PIN_YMM(s16[0][m]);
        TARMAC_PIN_YMM(s16[1][m]);
      }
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int h = 0; h < 2; ++h) {
      __m256i isum[M];
      for (int m = 0; m < M; ++m) {
        isum[m] = _mm256_add_epi32(_mm256_madd_epi16(s16[h][m], ones),
                                   _mm256_set1_epi32(xc[m * ldb + b]));
      }
      ScaleBlockAvx2<M, kMins>(isum, wp, b, xd, xs, ldb, h, acc[h]);
    }
  }
  StoreSlabAcc<M>(acc, c, ldc);
}

// Half h of the slab for tokens [0, M), signed Q8_0 weights.
template <int M>
TARMAC_TARGET_AVX2 inline void HalfSignedAvx2(const uint8_t* wp, int64_t nbk, const int8_t* xq,
                                              int64_t ldx, const float* xd, int64_t ldb,
                                              float* c, int64_t ldc, bool load_c, int h) {
  __m256 acc[M];
  for (int m = 0; m < M; ++m) {
    acc[m] = load_c ? _mm256_loadu_ps(c + m * ldc + 8 * h) : _mm256_setzero_ps();
  }
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* wb = wp + b * kBlockBytes + 32 * h;
    const int8_t* xb = xq + b * kQB;
    __m256i isum[M];
#pragma GCC unroll 8
    for (int k4 = 0; k4 < 8; ++k4) {
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 64 * k4));
      const __m256i aw = _mm256_sign_epi8(w, w);  // |w|; -128 stays 0x80 = 128 unsigned
      for (int m = 0; m < M; ++m) {
        const __m256i sx = _mm256_sign_epi8(BroadcastQ(xb + m * ldx + 4 * k4), w);
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones);
        isum[m] = k4 == 0 ? p : _mm256_add_epi32(isum[m], p);
        TARMAC_PIN_YMM(isum[m]);
      }
    }
    ScaleBlockAvx2<M, false>(isum, wp, b, xd, nullptr, ldb, h, acc);
  }
  for (int m = 0; m < M; ++m) _mm256_storeu_ps(c + m * ldc + 8 * h, acc[m]);
}

template <int M, bool kMins>
TARMAC_TARGET_AVX2 void TileAvx2(const uint8_t* wp, int64_t /*slab_stride*/, int64_t nbk,
                                 const int8_t* xq, int64_t ldx, const float* xd,
                                 const int32_t* xc, const float* xs, int64_t ldb, int offset,
                                 float* c, int64_t ldc, bool load_c) {
  for (int h = 0; h < 2; ++h) {
    if (!kMins && offset == 128) {
      HalfSignedAvx2<M>(wp, nbk, xq, ldx, xd, ldb, c, ldc, load_c, h);
    } else {
      if (h == 1) break;  // both halves at once, 3 tokens at a time
      constexpr int M0 = M < 3 ? M : 3;
      SlabNibblesAvx2<M0, kMins>(wp, nbk, xq, ldx, xd, xc, xs, ldb, c, ldc, load_c);
      if constexpr (M > M0) {
        SlabNibblesAvx2<M - M0, kMins>(wp, nbk, xq + M0 * ldx, ldx, xd + M0 * ldb, xc + M0 * ldb,
                                       xs + M0 * ldb, ldb, c + M0 * ldc, ldc, load_c);
      }
    }
  }
}

// Q8_0 slabs (u = w + 128) to w: the signed tile's operand. Other types keep unsigned nibbles.
TARMAC_TARGET_AVX2 void SignSlabsQ8Avx2(uint8_t* slabs, int64_t n_blocks, int offset) {
  if (offset != 128) return;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* q = slabs + b * kBlockBytes;
    for (int64_t i = 0; i < kQuantBytes; i += 32) {
      __m256i* p = reinterpret_cast<__m256i*>(q + i);
      _mm256_store_si256(p, _mm256_xor_si256(_mm256_load_si256(p), flip));
    }
  }
}

// PackSlabInterleaved with vector copies and nibble splits (the scales as there).
TARMAC_TARGET_AVX2 void PackSlabInterleavedAvx2(const QuantInterleaved& pk, int64_t g, int64_t b0,
                                                int64_t nbk, uint8_t* dst) {
  const bool q8 = pk.type() == DType::kQ8_0;
  const __m256i nib = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* db = dst + b * kBlockBytes;
    const uint8_t* q = pk.block_quants(g, b0 + b);
    for (int s = 0; s < 8; ++s) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * s));
      if (q8) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(db + 32 * s), v);
        _mm256_store_si256(reinterpret_cast<__m256i*>(db + 256 + 32 * s),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 256 + 32 * s)));
      } else {
        _mm256_store_si256(reinterpret_cast<__m256i*>(db + 32 * s), _mm256_and_si256(v, nib));
        _mm256_store_si256(reinterpret_cast<__m256i*>(db + 256 + 32 * s),
                           _mm256_and_si256(_mm256_srli_epi16(v, 4), nib));
      }
    }
    if (pk.type() == DType::kQ4_K) {
      PackSlabScalesMinsQ4_K(pk, g, b0 + b, db);
      continue;
    }
    const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pk.block_scales(g, b0 + b)));
    const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(pk.block_scales(g, b0 + b) + 8));
    _mm256_store_ps(reinterpret_cast<float*>(db + kQuantBytes), _mm256_cvtph_ps(h0));
    _mm256_store_ps(reinterpret_cast<float*>(db + kQuantBytes + 32), _mm256_cvtph_ps(h1));
    _mm256_store_ps(reinterpret_cast<float*>(db + kMinsOff), _mm256_setzero_ps());
    _mm256_store_ps(reinterpret_cast<float*>(db + kMinsOff + 32), _mm256_setzero_ps());
  }
}

// The scalar quantizer's function (bit-identical: the same d, 1/d and round-to-nearest-even
// products), 8 lanes at a time.
TARMAC_TARGET_AVX2 void QuantizeRowAvx2(const float* x, int64_t n, int offset, int8_t* q,
                                        float* d, int32_t* corr, float* s) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < n / kQB; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    int nan = 0;
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + b * kQB + 8 * i);
      nan |= _mm256_movemask_ps(_mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float am = _mm_cvtss_f32(m4);
    int32_t sum = 0;
    if (nan != 0 || !(am <= std::numeric_limits<float>::max())) {
      d[b] = std::numeric_limits<float>::quiet_NaN();
      std::memset(q + b * kQB, 0, kQB);
    } else if (am < kTinyAmax) {
      d[b] = 0.0f;
      std::memset(q + b * kQB, 0, kQB);
    } else {
      const float db = am / 127.0f;
      const __m256 id = _mm256_set1_ps(1.0f / db);
      d[b] = db;
      __m256i qi[4];
      __m256i acc = _mm256_setzero_si256();
      for (int i = 0; i < 4; ++i) {
        // cvtps rounds with MXCSR: to nearest even by default, as nearbyint in the scalar path.
        qi[i] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], id)), lo), hi);
        acc = _mm256_add_epi32(acc, qi[i]);
      }
      const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]),
                                             _mm256_packs_epi32(qi[2], qi[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQB),
                          _mm256_permutevar8x32_epi32(p16, perm));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
      sum = _mm_cvtsi128_si32(s4);
    }
    corr[b] = -offset * sum;
    s[b] = d[b] * static_cast<float>(sum);
  }
}

template <bool kMins, int... Ms>
constexpr std::array<TileFn, sizeof...(Ms)> Avx2Tiles(std::integer_sequence<int, Ms...>) {
  return {&TileAvx2<Ms + 1, kMins>...};
}
constexpr int kAvx2MR = 6;
constexpr auto kAvx2Tiles = Avx2Tiles<false>(std::make_integer_sequence<int, kAvx2MR>());
constexpr auto kAvx2TilesMins = Avx2Tiles<true>(std::make_integer_sequence<int, kAvx2MR>());
constexpr Path kAvx2Path{"avx2",
                         kAvx2MR,
                         1,
                         kAvx2Tiles.data(),
                         kAvx2TilesMins.data(),
                         &QuantizeRowAvx2,
                         &PackSlabFullScalar,
                         &PackSlabInterleavedAvx2,
                         nullptr,
                         nullptr,
                         false,
                         false,
                         &SignSlabsQ8Avx2};

// ------------------------------------------------------------------------------------------
// AVX-VNNI (Alder Lake and later, Zen 5): the AVX2 slab halves with vpdpbusd on ymm, which
// multiplies the unsigned bytes u = w + offset by the signed activations and accumulates in
// int32 in one instruction (exact; the offset correction starts the sums). MR = 6 tokens per
// tile, run as two passes of 3 over both halves.

// Both halves for tokens [0, M): one activation broadcast serves both halves' vpdpbusd (a
// third fewer uops per product; M <= 3 keeps 4M accumulators in registers).
template <int M, bool kMins>
TARMAC_TARGET_AVX2_VNNI inline void SlabAvxVnni(const uint8_t* wp, int64_t nbk, const int8_t* xq,
                                                int64_t ldx, const float* xd, const int32_t* xc,
                                                const float* xs, int64_t ldb, float* c,
                                                int64_t ldc, bool load_c) {
  __m256 acc[2][M];
  LoadSlabAcc<M>(c, ldc, load_c, acc);
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* wb = wp + b * kBlockBytes;
    const int8_t* xb = xq + b * kQB;
    __m256i isum[2][M];
    for (int m = 0; m < M; ++m) isum[0][m] = isum[1][m] = _mm256_set1_epi32(xc[m * ldb + b]);
#pragma GCC unroll 8
    for (int k4 = 0; k4 < 8; ++k4) {
      const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 64 * k4));
      const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 64 * k4 + 32));
      for (int m = 0; m < M; ++m) {
        const __m256i x = BroadcastQ(xb + m * ldx + 4 * k4);
        isum[0][m] = _mm256_dpbusd_avx_epi32(isum[0][m], w0, x);
        isum[1][m] = _mm256_dpbusd_avx_epi32(isum[1][m], w1, x);
      }
    }
    ScaleBlockAvx2<M, kMins>(isum[0], wp, b, xd, xs, ldb, 0, acc[0]);
    ScaleBlockAvx2<M, kMins>(isum[1], wp, b, xd, xs, ldb, 1, acc[1]);
  }
  StoreSlabAcc<M>(acc, c, ldc);
}

template <int M, bool kMins>
TARMAC_TARGET_AVX2_VNNI void TileAvxVnni(const uint8_t* wp, int64_t /*slab_stride*/, int64_t nbk,
                                         const int8_t* xq, int64_t ldx, const float* xd,
                                         const int32_t* xc, const float* xs, int64_t ldb,
                                         int /*offset*/, float* c, int64_t ldc, bool load_c) {
  constexpr int M0 = M < 3 ? M : 3;
  SlabAvxVnni<M0, kMins>(wp, nbk, xq, ldx, xd, xc, xs, ldb, c, ldc, load_c);
  if constexpr (M > M0) {
    SlabAvxVnni<M - M0, kMins>(wp, nbk, xq + M0 * ldx, ldx, xd + M0 * ldb, xc + M0 * ldb,
                               xs + M0 * ldb, ldb, c + M0 * ldc, ldc, load_c);
  }
}

template <bool kMins, int... Ms>
constexpr std::array<TileFn, sizeof...(Ms)> AvxVnniTiles(std::integer_sequence<int, Ms...>) {
  return {&TileAvxVnni<Ms + 1, kMins>...};
}
constexpr int kAvxVnniMR = 6;
constexpr auto kAvxVnniTiles = AvxVnniTiles<false>(std::make_integer_sequence<int, kAvxVnniMR>());
constexpr auto kAvxVnniTilesMins = AvxVnniTiles<true>(std::make_integer_sequence<int, kAvxVnniMR>());
constexpr Path kAvxVnniPath{"avx2-vnni",          kAvxVnniMR,       1,
                            kAvxVnniTiles.data(), kAvxVnniTilesMins.data(), &QuantizeRowAvx2,
                            &PackSlabFullScalar,  &PackSlabInterleaved};

}  // namespace

const Path* BestX86Path(Isa isa) {
  // isa <= ActiveIsa() <= NativeIsa(): the CPU has what each level needs (cpu_features.h).
  if (isa >= Isa::kAmx) return &kAmxPath;
  if (isa >= Isa::kAvx512) return &kVnniPath;
  if (isa >= Isa::kAvx2Vnni && Cpu().avx_vnni) return &kAvxVnniPath;
  if (isa >= Isa::kAvx2) return &kAvx2Path;
  return nullptr;
}
#else
const Path* BestX86Path(Isa) { return nullptr; }
#endif

}  // namespace tarmac::kernels::int8_internal
