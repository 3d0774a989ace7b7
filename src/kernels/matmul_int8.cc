// Int8 activation × Q8_0/Q4_0/Q4_K weight GEMM (see matmul_int8.h for the scheme and numerics).
// x86 paths use intrinsics in functions with target attributes, chosen at run time; the
// scalar path is plain C++ and runs everywhere.

#include "kernels/matmul_int8.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "base/check.h"
#include "hwy/targets.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_int8_amx.h"
#include "kernels/quant_interleaved.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TARMAC_INT8_X86 1
#include <immintrin.h>
#define TARMAC_TARGET_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
#define TARMAC_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
// GCC 12's reduce/convert intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports falsely.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#else
#define TARMAC_INT8_X86 0
#endif

namespace tarmac::kernels {
namespace {

constexpr int64_t kQB = 32;          // activation / weight block
constexpr int64_t kSlabRows = 16;    // rows per packed slab (one zmm of int32 lanes)
// Per block: [8 k-groups][16 rows][4 k] bytes, 16 f32 scales, 16 f32 mins (Q4_K only); the
// AMX-INT8 tile reads the same slabs (matmul_int8_amx.h).
constexpr int64_t kQuantBytes = kInt8SlabQuantBytes;
constexpr int64_t kMinsOff = kInt8SlabMinsOff;
constexpr int64_t kBlockBytes = kInt8SlabBlockBytes;
static_assert(kQuantBytes == 8 * kSlabRows * 4 && kMinsOff == kQuantBytes + kSlabRows * 4);
// K chunk in 32-blocks: a slab chunk is 16 × 640 = 10 KiB, an MR-token slice of x 6 × 512 B.
// A multiple of 8 so that chunks start at Q4_K super-blocks.
constexpr int64_t kKCB = 16;
// Below this block max|x| the block is treated as zero (1/d would overflow).
constexpr float kTinyAmax = 0x1p-100f;

// u = w + offset: Q8_0 128 (int8 -> uint8), Q4_0 8 (the raw nibble), Q4_K 0 (nibbles are
// unsigned; the mins go through the per-block activation sums instead).
int WeightOffset(DType t) { return t == DType::kQ8_0 ? 128 : t == DType::kQ4_0 ? 8 : 0; }
// Bytes per weight block of the type's own layout (a Q4_K super-block covers 8 of our blocks).
int64_t WeightBlockBytes(DType t) {
  return t == DType::kQ8_0 ? int64_t{sizeof(BlockQ8_0)}
         : t == DType::kQ4_0 ? int64_t{sizeof(BlockQ4_0)} : int64_t{sizeof(BlockQ4_K)};
}

// Quantized activations of all tokens: q [t][K]; d, corr and s = d · sum_b q [t][K/32].
struct Acts {
  const int8_t* q;
  const float* d;
  const int32_t* corr;
  const float* s;
  int64_t K;
  int64_t nb;
};

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

// ------------------------------------------------------------------------------------------
// Scalar pieces (also the reference's building blocks).

void QuantizeRowScalar(const float* x, int64_t n, int offset, int8_t* q, float* d,
                       int32_t* corr, float* s) {
  for (int64_t b = 0; b < n / kQB; ++b) {
    const float* xb = x + b * kQB;
    float amax = 0.0f;
    bool finite = true;
    for (int k = 0; k < kQB; ++k) {
      finite = finite && std::isfinite(xb[k]);
      amax = std::max(amax, std::fabs(xb[k]));
    }
    int32_t sum = 0;
    if (!finite) {
      d[b] = std::numeric_limits<float>::quiet_NaN();
      std::memset(q + b * kQB, 0, kQB);
    } else if (amax < kTinyAmax) {
      d[b] = 0.0f;
      std::memset(q + b * kQB, 0, kQB);
    } else {
      const float db = amax / 127.0f;
      const float id = 1.0f / db;
      d[b] = db;
      for (int k = 0; k < kQB; ++k) {
        const float r = std::nearbyint(xb[k] * id);  // default rounding: to nearest even
        const int v = static_cast<int>(std::clamp(r, -127.0f, 127.0f));
        q[b * kQB + k] = static_cast<int8_t>(v);
        sum += v;
      }
    }
    corr[b] = -offset * sum;
    s[b] = d[b] * static_cast<float>(sum);
  }
}

// Decodes block b of a Q8_0/Q4_0/Q4_K row to unsigned bytes u = w + offset, and its scale.
// Q4_K: block b is sub-block b % 8 of super-block b / 8; value = scale · u - *min.
inline float DecodeBlockU8(DType t, const uint8_t* row, int64_t b, uint8_t* u, float* min) {
  *min = 0.0f;
  if (t == DType::kQ4_K) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + b / 8;
    const int j = static_cast<int>(b % 8);
    const uint8_t* q = blk->qs + 32 * (j / 2);
    for (int k = 0; k < kQB; ++k) u[k] = (j % 2 == 0) ? (q[k] & 15) : (q[k] >> 4);
    uint8_t sc, m;
    Q4KScaleMin(j, blk->scales, &sc, &m);
    *min = F16ToF32(blk->dmin) * m;  // exact: 11-bit × 6-bit significands
    return F16ToF32(blk->d) * sc;
  }
  if (t == DType::kQ8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    for (int k = 0; k < kQB; ++k) u[k] = static_cast<uint8_t>(blk->qs[k]) ^ 0x80u;
    return F16ToF32(blk->d);
  }
  const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
  for (int j = 0; j < kQB / 2; ++j) {
    u[j] = blk->qs[j] & 15;
    u[j + kQB / 2] = blk->qs[j] >> 4;
  }
  return F16ToF32(blk->d);
}

// Packs rows [r0, r0 + nrows) (nrows <= 16; missing rows zero with scale 0), blocks
// [b0, b0 + nbk) into one slab.
void PackSlabScalar(const MatrixView& w, int64_t r0, int64_t nrows, int64_t b0, int64_t nbk,
                    uint8_t* dst) {
  uint8_t u[kQB];
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* db = dst + b * kBlockBytes;
    for (int64_t i = 0; i < kSlabRows; ++i) {
      float s = 0.0f, mn = 0.0f;
      if (i < nrows) {
        s = DecodeBlockU8(w.type, w.row(r0 + i), b0 + b, u, &mn);
      } else {
        std::memset(u, 0, sizeof(u));
      }
      for (int k = 0; k < kQB; ++k) db[(k / 4) * 64 + i * 4 + (k % 4)] = u[k];
      std::memcpy(db + kQuantBytes + 4 * i, &s, 4);
      std::memcpy(db + kMinsOff + 4 * i, &mn, 4);
    }
  }
}

// The slab of row group g (rows 16g .. 16g+15), blocks [b0, b0 + nbk), from a QuantInterleaved
// copy: its quant bytes are already [4-column group][16 rows][4] (Q8_0 as w + 128, Q4_0 as
// nibble pairs whose low/high halves are column groups s and s + 4), so this is a copy plus
// the scale conversion.
void PackSlabInterleaved(const QuantInterleaved& pk, int64_t g, int64_t b0, int64_t nbk,
                         uint8_t* dst) {
  const int64_t qb = pk.quant_bytes();
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* db = dst + b * kBlockBytes;
    const uint8_t* q = pk.quants(g) + (b0 + b) * qb;
    if (pk.type() == DType::kQ8_0) {
      std::memcpy(db, q, kQuantBytes);
    } else {
      for (int64_t j = 0; j < 256; ++j) {
        db[j] = q[j] & 15;
        db[256 + j] = q[j] >> 4;
      }
    }
    const uint16_t* sc = pk.scales(g) + (b0 + b) * kSlabRows;
    for (int64_t i = 0; i < kSlabRows; ++i) {
      const float s = F16ToF32(sc[i]);
      std::memcpy(db + kQuantBytes + 4 * i, &s, 4);
    }
    std::memset(db + kMinsOff, 0, kSlabRows * 4);
  }
}

void PackSlabFullScalar(const MatrixView& w, int64_t r0, int64_t b0, int64_t nbk, uint8_t* dst) {
  PackSlabScalar(w, r0, kSlabRows, b0, nbk, dst);
}

template <int M, bool kMins>
void TileScalar(const uint8_t* wp, int64_t /*slab_stride*/, int64_t nbk, const int8_t* xq,
                int64_t ldx, const float* xd, const int32_t* xc, const float* xs, int64_t ldb,
                int /*offset*/, float* c, int64_t ldc, bool load_c) {
  for (int m = 0; m < M; ++m) {
    for (int i = 0; i < kSlabRows; ++i) {
      float acc = load_c ? c[m * ldc + i] : 0.0f;
      for (int64_t b = 0; b < nbk; ++b) {
        const uint8_t* wb = wp + b * kBlockBytes;
        const int8_t* xb = xq + m * ldx + b * kQB;
        int32_t isum = xc[m * ldb + b];
        for (int k = 0; k < kQB; ++k) isum += int32_t{wb[(k / 4) * 64 + i * 4 + (k % 4)]} * xb[k];
        float dw;
        std::memcpy(&dw, wb + kQuantBytes + 4 * i, 4);
        acc = std::fma(static_cast<float>(isum), dw * xd[m * ldb + b], acc);
        if (kMins) {
          float mn;
          std::memcpy(&mn, wb + kMinsOff + 4 * i, 4);
          acc = std::fma(-mn, xs[m * ldb + b], acc);
        }
      }
      c[m * ldc + i] = acc;
    }
  }
}

constexpr int kScalarMR = 4;
constexpr TileFn kScalarTiles[kScalarMR] = {&TileScalar<1, false>, &TileScalar<2, false>,
                                            &TileScalar<3, false>, &TileScalar<4, false>};
constexpr TileFn kScalarTilesMins[kScalarMR] = {&TileScalar<1, true>, &TileScalar<2, true>,
                                                &TileScalar<3, true>, &TileScalar<4, true>};
constexpr Path kScalarPath{"scalar", kScalarMR, 1, kScalarTiles, kScalarTilesMins,
                           &QuantizeRowScalar, &PackSlabFullScalar, &PackSlabInterleaved};

#if TARMAC_INT8_X86
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
  const int64_t qb = pk.quant_bytes();
  const bool q8 = pk.type() == DType::kQ8_0;
  const __m512i nib = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* db = dst + b * kBlockBytes;
    const uint8_t* q = pk.quants(g) + (b0 + b) * qb;
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
    const __m256i h = _mm256_load_si256(
        reinterpret_cast<const __m256i*>(pk.scales(g) + (b0 + b) * kSlabRows));
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
// AVX2: one slab = 2 ymm of 8 rows; |w| · sign(x, w) through maddubs (exact, see header).

template <int M, bool kMins>
TARMAC_TARGET_AVX2 void TileAvx2(const uint8_t* wp, int64_t /*slab_stride*/, int64_t nbk,
                                 const int8_t* xq, int64_t ldx, const float* xd,
                                 const int32_t* /*xc*/, const float* xs, int64_t ldb, int offset,
                                 float* c, int64_t ldc, bool load_c) {
  __m256 acc[M][2];
  for (int m = 0; m < M; ++m) {
    for (int h = 0; h < 2; ++h)
      acc[m][h] = load_c ? _mm256_loadu_ps(c + m * ldc + 8 * h) : _mm256_setzero_ps();
  }
  const __m256i off = _mm256_set1_epi8(static_cast<char>(offset));
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* wb = wp + b * kBlockBytes;
    const int8_t* xb = xq + b * kQB;
    __m256i ia[M][2];
    for (int m = 0; m < M; ++m) ia[m][0] = ia[m][1] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k4 = 0; k4 < 8; ++k4) {
      for (int h = 0; h < 2; ++h) {
        const __m256i ws = _mm256_sub_epi8(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 64 * k4 + 32 * h)), off);
        const __m256i wa = _mm256_abs_epi8(ws);
        for (int m = 0; m < M; ++m) {
          int32_t xi;
          std::memcpy(&xi, xb + m * ldx + 4 * k4, 4);
          const __m256i xs = _mm256_sign_epi8(_mm256_set1_epi32(xi), ws);
          ia[m][h] = _mm256_add_epi32(ia[m][h], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, xs), ones));
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = _mm256_load_ps(reinterpret_cast<const float*>(wb + kQuantBytes + 32 * h));
      for (int m = 0; m < M; ++m) {
        const __m256 dx = _mm256_set1_ps(xd[m * ldb + b]);
        acc[m][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[m][h]), _mm256_mul_ps(dw, dx), acc[m][h]);
      }
      if (kMins) {
        const __m256 mn = _mm256_load_ps(reinterpret_cast<const float*>(wb + kMinsOff + 32 * h));
        for (int m = 0; m < M; ++m)
          acc[m][h] = _mm256_fnmadd_ps(mn, _mm256_set1_ps(xs[m * ldb + b]), acc[m][h]);
      }
    }
  }
  for (int m = 0; m < M; ++m) {
    for (int h = 0; h < 2; ++h) _mm256_storeu_ps(c + m * ldc + 8 * h, acc[m][h]);
  }
}

constexpr int kAvx2MR = 2;
constexpr TileFn kAvx2Tiles[kAvx2MR] = {&TileAvx2<1, false>, &TileAvx2<2, false>};
constexpr TileFn kAvx2TilesMins[kAvx2MR] = {&TileAvx2<1, true>, &TileAvx2<2, true>};
constexpr Path kAvx2Path{"avx2", kAvx2MR, 1, kAvx2Tiles, kAvx2TilesMins, &QuantizeRowScalar,
                         &PackSlabFullScalar, &PackSlabInterleaved};
#endif  // TARMAC_INT8_X86

const Path& SelectPath() {
#if TARMAC_INT8_X86
  static const bool cpu_vnni = __builtin_cpu_supports("avx512f") &&
                               __builtin_cpu_supports("avx512bw") &&
                               __builtin_cpu_supports("avx512vl") &&
                               __builtin_cpu_supports("avx512dq") &&
                               __builtin_cpu_supports("avx512vnni") &&
                               __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  static const bool cpu_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                               __builtin_cpu_supports("f16c");
  // Lower target bits are the better x86 targets (AVX3_DL < AVX3 < AVX2 < SSE4 < ...).
  const int64_t target = MatMulHwyTarget();
  if (cpu_vnni && target <= HWY_AVX3) return AmxInt8Usable() ? kAmxPath : kVnniPath;
  if (cpu_avx2 && target <= HWY_AVX2) return kAvx2Path;
#endif
  return kScalarPath;
}

// y[t][r] for all tokens, rows [r0, r1).
void MatMulRowsInt8(const Path& path, const MatrixView& w, const Acts& a, int64_t n_tokens,
                    float* y, int64_t r0, int64_t r1) {
  const int64_t NR = kSlabRows * path.nv;
  const int64_t n_panels = (r1 - r0 + NR - 1) / NR;
  const int64_t n_slabs = n_panels * path.nv;
  const int64_t slab_stride = kKCB * kBlockBytes;
  const int offset = WeightOffset(w.type);
  thread_local AlignedBuffer scratch;
  const size_t need = static_cast<size_t>(n_slabs * slab_stride);
  if (scratch.size() < need) scratch.Resize(need);
  uint8_t* packed = scratch.data();
  const bool gather_ok = w.row_stride <= (int64_t{1} << 31) / 16;
  alignas(64) float tmp[16 * 64];  // edge tile: up to 16 tokens × 64 rows
  TARMAC_DCHECK(path.mr <= 16 && NR <= 64);
  if (path.begin != nullptr) path.begin();
  for (int64_t kb0 = 0; kb0 < a.nb; kb0 += kKCB) {
    const int64_t nbk = std::min(kKCB, a.nb - kb0);
    for (int64_t s = 0; s < n_slabs; ++s) {
      const int64_t sr0 = r0 + s * kSlabRows;
      const int64_t nrows = std::clamp<int64_t>(r1 - sr0, 0, kSlabRows);
      uint8_t* dst = packed + s * slab_stride;
      TARMAC_DCHECK(sr0 % kSlabRows == 0);
      if (w.packed != nullptr && nrows > 0) {
        // The interleaved decode copy (its rows past w.rows are zero, as a partial slab needs).
        path.pack_interleaved(*static_cast<const QuantInterleaved*>(w.packed), sr0 / kSlabRows,
                              kb0, nbk, dst);
      } else if (nrows == kSlabRows && gather_ok) {
        path.pack_full(w, sr0, kb0, nbk, dst);
      } else {
        PackSlabScalar(w, sr0, nrows, kb0, nbk, dst);
      }
      if (path.sign_slabs != nullptr && offset != 0) path.sign_slabs(dst, nbk, offset);
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += path.mr) {
      const int m = static_cast<int>(std::min<int64_t>(path.mr, n_tokens - t0));
      const TileFn tile = (w.type == DType::kQ4_K ? path.tiles_mins : path.tiles)[m - 1];
      const int8_t* xq = a.q + t0 * a.K + kb0 * kQB;
      const int64_t ao = path.acts_by_group ? (t0 / path.mr * a.nb + kb0) * path.mr
                                            : t0 * a.nb + kb0;
      const float* xd = a.d + ao;
      const int32_t* xc = a.corr + ao;
      const float* xs = a.s + ao;
      for (int64_t p = 0; p < n_panels; ++p) {
        const int64_t pr0 = r0 + p * NR;
        const int64_t valid = std::min(NR, r1 - pr0);
        const uint8_t* wp = packed + p * path.nv * slab_stride;
        float* c = y + t0 * w.rows + pr0;
        if (valid == NR) {
          tile(wp, slab_stride, nbk, xq, a.K, xd, xc, xs, a.nb, offset, c, w.rows, kb0 > 0);
        } else {
          for (int i = 0; i < m; ++i) {
            std::memset(tmp + i * NR, 0, NR * sizeof(float));
            if (kb0 > 0) std::memcpy(tmp + i * NR, c + i * w.rows, valid * sizeof(float));
          }
          tile(wp, slab_stride, nbk, xq, a.K, xd, xc, xs, a.nb, offset, tmp, NR, kb0 > 0);
          for (int i = 0; i < m; ++i) std::memcpy(c + i * w.rows, tmp + i * NR, valid * sizeof(float));
        }
      }
    }
  }
  if (path.end != nullptr) path.end();
}

}  // namespace

bool IsInt8MatMulType(DType type) {
  return type == DType::kQ8_0 || type == DType::kQ4_0 || type == DType::kQ4_K;
}

const char* Int8MatMulPath() { return SelectPath().name; }

void QuantizeActivationsQ8Ref(const float* x, int64_t n, int8_t* q, float* d) {
  TARMAC_CHECK(n % kQB == 0);
  std::vector<int32_t> corr(n / kQB);
  std::vector<float> s(n / kQB);
  QuantizeRowScalar(x, n, 0, q, d, corr.data(), s.data());
}

void QuantizeActivationsQ8(const float* x, int64_t n, int offset, int8_t* q, float* d,
                           int32_t* corr, float* s) {
  TARMAC_CHECK(n % kQB == 0);
  SelectPath().quant(x, n, offset, q, d, corr, s);
}

void MatMulInt8(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  TARMAC_CHECK(IsInt8MatMulType(w.type));
  TARMAC_CHECK(n_tokens >= 0 && w.rows >= 0 && w.cols >= 0 &&
               w.cols % Traits(w.type).block_size == 0);
  TARMAC_CHECK(w.rows <= 1 || w.row_stride >= RowBytes(w.type, w.cols));
  if (n_tokens == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
  const Path& path = SelectPath();
  const int64_t K = w.cols, nb = K / kQB;
  const int offset = WeightOffset(w.type);
  const int threads = pool ? pool->num_threads() : 1;

  // Quantized activations: one buffer per calling thread, reused across calls.
  thread_local AlignedBuffer act_buf;
  // Whole groups of mr token rows when the tiles read them (the padding rows are zero).
  const int64_t q_rows = path.pad_tokens ? (n_tokens + path.mr - 1) / path.mr * path.mr : n_tokens;
  const int64_t q_bytes = (q_rows * K + 63) / 64 * 64;
  // d/corr/s, then (acts_by_group) their copies in group layout.
  const int64_t groups = (n_tokens + path.mr - 1) / path.mr;
  const int64_t by_group = path.acts_by_group ? groups * path.mr * nb : 0;
  const size_t need = static_cast<size_t>(q_bytes + (n_tokens * nb + by_group) * 12);
  if (act_buf.size() < need) act_buf.Resize(need);
  auto* q = act_buf.as<int8_t>();
  auto* d = reinterpret_cast<float*>(act_buf.data() + q_bytes);
  auto* corr = reinterpret_cast<int32_t*>(d + n_tokens * nb);
  auto* sums = reinterpret_cast<float*>(corr + n_tokens * nb);
  if (q_rows > n_tokens) std::memset(q + n_tokens * K, 0, (q_rows - n_tokens) * K);
  auto quant = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t)
      path.quant(x + t * K, K, offset, q + t * K, d + t * nb, corr + t * nb, sums + t * nb);
  };
  if (threads == 1 || n_tokens * K < 16384) {
    quant(0, n_tokens, 0);
  } else {
    pool->ParallelFor(n_tokens, std::max<int64_t>(1, n_tokens / (4 * threads)), quant);
  }
  Acts acts{q, d, corr, sums, K, nb};
  if (path.acts_by_group) {
    auto* gd = sums + n_tokens * nb;
    auto* gc = reinterpret_cast<int32_t*>(gd + by_group);
    auto* gs = reinterpret_cast<float*>(gc + by_group);
    const int64_t mr = path.mr;
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t b = 0; b < nb; ++b) {
        for (int64_t i = 0; i < mr; ++i) {
          const int64_t t = g * mr + i, o = (g * nb + b) * mr + i;
          const bool live = t < n_tokens;
          gd[o] = live ? d[t * nb + b] : 0.0f;
          gc[o] = live ? corr[t * nb + b] : 0;
          gs[o] = live ? sums[t * nb + b] : 0.0f;
        }
      }
    }
    acts = Acts{q, gd, gc, gs, K, nb};
  }

  // Row blocks of up to 4 panels, fewer when that leaves under ~4 blocks per thread.
  const int64_t nr = kSlabRows * path.nv;
  const int64_t panels_per_block =
      std::clamp<int64_t>((w.rows + nr * 4 * threads - 1) / (nr * 4 * threads), 1, 4);
  const int64_t block = nr * panels_per_block;
  const int64_t n_blocks = (w.rows + block - 1) / block;
  auto run = [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b)
      MatMulRowsInt8(path, w, acts, n_tokens, y, b * block, std::min(w.rows, (b + 1) * block));
  };
  if (threads == 1 || n_blocks == 1) {
    run(0, n_blocks, 0);
  } else {
    pool->ParallelFor(n_blocks, 1, run);
  }
}

void MatMulInt8Ref(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  TARMAC_CHECK(IsInt8MatMulType(w.type) && w.cols % Traits(w.type).block_size == 0);
  const int64_t K = w.cols, nb = K / kQB;
  std::vector<int8_t> q(n_tokens * K);
  std::vector<float> d(n_tokens * nb);
  for (int64_t t = 0; t < n_tokens; ++t) QuantizeActivationsQ8Ref(x + t * K, K, &q[t * K], &d[t * nb]);
  const int offset = WeightOffset(w.type);
  std::vector<int> wq(K);
  std::vector<float> wd(nb), wm(nb);
  uint8_t u[kQB];
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      wd[b] = DecodeBlockU8(w.type, w.row(r), b, u, &wm[b]);
      for (int k = 0; k < kQB; ++k) wq[b * kQB + k] = int{u[k]} - offset;
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t isum = 0;
        for (int k = 0; k < kQB; ++k) isum += wq[b * kQB + k] * q[t * K + b * kQB + k];
        acc = std::fma(static_cast<float>(isum), wd[b] * d[t * nb + b], acc);
        if (w.type == DType::kQ4_K) {  // - min · sum_k x_k, with sum_k x_k ≈ d · sum_k q_k
          int32_t qsum = 0;
          for (int k = 0; k < kQB; ++k) qsum += q[t * K + b * kQB + k];
          acc = std::fma(-wm[b], d[t * nb + b] * static_cast<float>(qsum), acc);
        }
      }
      y[t * w.rows + r] = acc;
    }
  }
}

}  // namespace tarmac::kernels
