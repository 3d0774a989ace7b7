// Int8-activation decode matvec for Q8_0 / Q4_0 (see matvec_int8.h for the scheme and
// numerics). The AVX-512 VNNI + VBMI (+ GFNI) path uses intrinsics in functions with a target
// attribute, chosen at run time; elsewhere MatVecInt8 computes the same through MatMulInt8.

#include "kernels/matvec_int8.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "base/check.h"
#include "hwy/targets.h"
#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_int8.h"
#include "kernels/matvec_int8_avx2.h"
#include "kernels/quant_interleaved.h"
#include "kernels/shared_ranges.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TARMAC_MV8_X86 1
#include <immintrin.h>
#define TARMAC_TARGET_VNNI_VBMI                                                             \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,gfni,fma," \
                        "f16c")))
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // see matmul_int8.cc
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#else
#define TARMAC_MV8_X86 0
#endif

namespace tarmac::kernels {
namespace {

constexpr int64_t kQB = 32;                 // block (weights and activations)
constexpr int64_t kGroupBlocks = 4;         // blocks per zmm step

// x of 4 consecutive blocks (4g .. 4g+3), laid out for the per-row kernel: byte 16j + t of lo
// is element t of block 4g + j, of hi element 16 + t; int32/f32 lane 4j + m of corr/dx belongs
// to block 4g + j, and corr = -o · (the 8 quants lane m of that block multiplies: lo and hi
// bytes 4m .. 4m+3). 256 bytes, one aligned step.
struct alignas(64) XGroup {
  int8_t lo[64];
  int8_t hi[64];
  int32_t corr[16];
  float dx[16];
};
static_assert(sizeof(XGroup) == 256);

// Blocks past the last whole group, in natural order.
struct XTail {
  int8_t q[3 * kQB];
  float d[3];
  int32_t corr[3];  // -o · sum of the block's quants
};

#if TARMAC_MV8_X86

// x quantized (QuantizeActivationsQ8) into the per-row kernel's group layout.
void QuantizeX(const float* x, int64_t nb, int offset, XGroup* groups, XTail* tail) {
  const int64_t ng = nb / kGroupBlocks;
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d, s;
  thread_local std::vector<int32_t> corr;
  q.resize(nb * kQB);
  d.resize(nb);
  s.resize(nb);
  corr.resize(nb);
  QuantizeActivationsQ8(x, nb * kQB, offset, q.data(), d.data(), corr.data(), s.data());
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* qb = q.data() + b * kQB;
    const int64_t g = b / kGroupBlocks;
    const int j = static_cast<int>(b % kGroupBlocks);
    if (g < ng) {
      XGroup& xg = groups[g];
      std::memcpy(xg.lo + 16 * j, qb, 16);
      std::memcpy(xg.hi + 16 * j, qb + 16, 16);
      for (int m = 0; m < 4; ++m) {
        int32_t sum = 0;
        for (int t = 0; t < 4; ++t) sum += qb[4 * m + t] + qb[16 + 4 * m + t];
        xg.corr[4 * j + m] = -offset * sum;
        xg.dx[4 * j + m] = d[b];
      }
    } else {
      const int64_t k = b - ng * kGroupBlocks;
      std::memcpy(tail->q + k * kQB, qb, kQB);
      tail->d[k] = d[b];
      tail->corr[k] = corr[b];
    }
  }
}

// Byte-permute indices (vpermt2b: index bit 6 picks the second source) that gather, for each
// of 4 blocks j, the 16 weight bytes of half h into bytes 16j .. 16j+15.
//   Q4_0 (18-byte blocks; sources p, p + 8): qs of block j at 18j + 2.
//   Q8_0 (34-byte blocks): low halves at 34j + 2 from sources (p, p + 64); high halves at
//   34j + 18 from sources (p + 8, p + 72).
// No source reaches past the 4 blocks, so the last group of a matrix reads nothing beyond it.
struct Indices {
  __m512i q4, q8_lo, q8_hi;  // byte indices
  __m512i s4, s8;            // word indices of the scales (vpermw / vpermt2w), 4j + m -> d_j
};

inline int SrcByte(int pos, int second_off) {
  // pos: byte offset from p; second source starts at p + second_off and covers 64 bytes.
  return pos < 64 ? pos : 64 + (pos - second_off);
}

TARMAC_TARGET_VNNI_VBMI Indices MakeIndices() {
  alignas(64) uint8_t q4[64], q8lo[64], q8hi[64];
  alignas(64) uint16_t s4[32] = {}, s8[32] = {};
  for (int j = 0; j < 4; ++j) {
    for (int t = 0; t < 16; ++t) {
      q4[16 * j + t] = static_cast<uint8_t>(SrcByte(18 * j + 2 + t, 8));
      q8lo[16 * j + t] = static_cast<uint8_t>(SrcByte(34 * j + 2 + t, 64));
      // High halves: first source is p + 8, so positions are relative to p + 8.
      q8hi[16 * j + t] = static_cast<uint8_t>(SrcByte(34 * j + 18 + t - 8, 64));
    }
    for (int m = 0; m < 4; ++m) {
      s4[4 * j + m] = static_cast<uint16_t>(9 * j);  // byte 18j, within p's 64 bytes
      // Byte 34j, word 17j: words 32+ come from the second source, p + 64, which is word 32.
      s8[4 * j + m] = static_cast<uint16_t>(17 * j);
    }
  }
  Indices ix;
  ix.q4 = _mm512_load_si512(q4);
  ix.q8_lo = _mm512_load_si512(q8lo);
  ix.q8_hi = _mm512_load_si512(q8hi);
  ix.s4 = _mm512_load_si512(s4);
  ix.s8 = _mm512_load_si512(s8);
  return ix;
}

// How far ahead the row is prefetched (as the int16 matvec: the loop alone keeps too few
// misses in flight to stream at DRAM speed).
constexpr int64_t kAhead = 3072;

// One group step of one row: acc += f32(int32 partial sums) · (d_w · d_x).
template <bool kQ8>
TARMAC_TARGET_VNNI_VBMI inline __m512 GroupStep(const uint8_t* p, const XGroup& xg,
                                                const Indices& ix, __m512 acc) {
  const __m512i v0 = _mm512_loadu_si512(p);
  __m512i lo, hi, sc;
  if constexpr (kQ8) {
    const __m512i v1 = _mm512_loadu_si512(p + 64);
    const __m512i v0h = _mm512_loadu_si512(p + 8);
    const __m512i v1h = _mm512_loadu_si512(p + 72);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    lo = _mm512_xor_si512(_mm512_permutex2var_epi8(v0, ix.q8_lo, v1), flip);
    hi = _mm512_xor_si512(_mm512_permutex2var_epi8(v0h, ix.q8_hi, v1h), flip);
    sc = _mm512_permutex2var_epi16(v0, ix.s8, v1);
  } else {
    const __m512i v1 = _mm512_loadu_si512(p + 8);
    const __m512i nib = _mm512_set1_epi8(0x0f);
    const __m512i qs = _mm512_permutex2var_epi8(v0, ix.q4, v1);
    lo = _mm512_and_si512(qs, nib);
    hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), nib);
    sc = _mm512_permutexvar_epi16(ix.s4, v0);
  }
  __m512i isum = _mm512_load_si512(xg.corr);
  isum = _mm512_dpbusd_epi32(isum, lo, _mm512_load_si512(xg.lo));
  isum = _mm512_dpbusd_epi32(isum, hi, _mm512_load_si512(xg.hi));
  const __m512 scale = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(sc)),
                                     _mm512_load_ps(xg.dx));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc);
}

// Leftover blocks (< 4) of one row, in natural order.
template <bool kQ8>
inline float TailBlocks(const uint8_t* row, int64_t b0, int64_t nt, const XTail& xt) {
  float acc = 0.0f;
  for (int64_t k = 0; k < nt; ++k) {
    int32_t isum = xt.corr[k];
    uint16_t d;
    if constexpr (kQ8) {
      const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b0 + k];
      for (int t = 0; t < kQB; ++t) isum += (blk.qs[t] + 128) * xt.q[k * kQB + t];
      d = blk.d;
    } else {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b0 + k];
      for (int t = 0; t < 16; ++t) {
        isum += (blk.qs[t] & 15) * xt.q[k * kQB + t] + (blk.qs[t] >> 4) * xt.q[k * kQB + 16 + t];
      }
      d = blk.d;
    }
    acc = std::fma(static_cast<float>(isum), F16ToF32(d) * xt.d[k], acc);
  }
  return acc;
}

// y[r] for r in [r0, r1), one row at a time: two rows interleaved (sharing the x loads) win on
// L2-resident weights but lose streaming from DRAM, which is what decode does (bench/NOTES.md).
template <bool kQ8>
TARMAC_TARGET_VNNI_VBMI void RowsVnni(const MatrixView& w, const XGroup* xg, int64_t ng,
                                      const XTail& xt, int64_t nt, float* y, int64_t r0,
                                      int64_t r1) {
  static const Indices ix = MakeIndices();
  constexpr int64_t kGroupBytes = kGroupBlocks * (kQ8 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0));
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* a = w.row(r);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
      const uint8_t* p = a + g * kGroupBytes;
      // Into L2 (T1) rather than L1 (T0): faster for both types (bench/NOTES.md).
      _mm_prefetch(reinterpret_cast<const char*>(p + kAhead), _MM_HINT_T1);
      if constexpr (kQ8) _mm_prefetch(reinterpret_cast<const char*>(p + kAhead + 64), _MM_HINT_T1);
      acc = GroupStep<kQ8>(p, xg[g], ix, acc);
    }
    y[r] = _mm512_reduce_add_ps(acc) + TailBlocks<kQ8>(a, ng * kGroupBlocks, nt, xt);
  }
}

// Block b of group g of an interleaved Q4_0 / Q8_0 copy: its quants and scales; issues the
// walk's prefetches for the block (pf).
template <DType kT>
inline void UnitBlock(const QuantInterleaved& pk, const StreamPrefetch& pf, int64_t g, int64_t b,
                      const uint8_t** p, const uint16_t** sc) {
  using QI = QuantInterleaved;
  const uint8_t* grp = pk.group(g);
  *p = grp + QI::BlockOffset(kT, b);
  *sc = reinterpret_cast<const uint16_t*>(grp + QI::ScalesOffset(kT, b));
  PrefetchInterleavedBlock<kT>(pf, *p, b);
}

// Block b's exact int32 sums of one group's 16 rows (p: the block's quants, xb: the token's
// quantized activations of the block, corr_b: its offset correction).
template <bool kQ8>
TARMAC_TARGET_VNNI_VBMI inline __m512i BlockSums(const uint8_t* p, const int32_t* xb,
                                                 int32_t corr_b) {
  const __m512i nib = _mm512_set1_epi8(0x0f);
  // GF(2) affine map taking each byte to byte >> 4 (result bit i = source bit i + 4): one
  // instruction instead of a shift and a mask.
  const __m512i shr4 = _mm512_set1_epi64(0x1020408000000000LL);
  __m512i ia = _mm512_set1_epi32(corr_b);
  __m512i ib = _mm512_setzero_si512();
  if constexpr (kQ8) {  // unsigned bytes qs + 128: straight into vpdpbusd
    for (int s = 0; s < 4; ++s) {
      ia = _mm512_dpbusd_epi32(ia, _mm512_load_si512(p + 64 * s), _mm512_set1_epi32(xb[s]));
      ib = _mm512_dpbusd_epi32(ib, _mm512_load_si512(p + 64 * (4 + s)),
                               _mm512_set1_epi32(xb[4 + s]));
    }
  } else {
    for (int s = 0; s < 4; ++s) {
      const __m512i wv = _mm512_load_si512(p + 64 * s);
      ia = _mm512_dpbusd_epi32(ia, _mm512_and_si512(wv, nib), _mm512_set1_epi32(xb[s]));
      ib = _mm512_dpbusd_epi32(ib, _mm512_gf2p8affine_epi64_epi8(wv, shr4, 0),
                               _mm512_set1_epi32(xb[4 + s]));
    }
  }
  return _mm512_add_epi32(ia, ib);
}

// acc + f32(isum) · (d_w · dx), d_w the group's 16 f16 scales of the block at sc.
TARMAC_TARGET_VNNI_VBMI inline __m512 FoldBlock(__m512i isum, const uint16_t* sc, float dx,
                                                __m512 acc) {
  const __m512 scale =
      _mm512_mul_ps(_mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sc))),
                    _mm512_set1_ps(dx));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc);
}

// y[16g .. 16g + 16) for row group g of an interleaved matrix and, with NG 2, y2's rows of
// group g2 of pk2 (the next group of the same matrix, or a partner matrix's): each int32 lane
// is one row; per block, acc = fma(f32(isum), d_w · d_x, acc) in block order, exactly as
// MatMulInt8Ref does for each row (so the results are bit-identical to it). Two groups walk
// two weight streams at once (as the AVX2 one-token pass; bench/NOTES.md).
template <bool kQ8, int NG>
TARMAC_TARGET_VNNI_VBMI void GroupRun(const QuantInterleaved& pk, const StreamPrefetch& pf,
                                      const int8_t* xq, const float* dx, const int32_t* corr,
                                      float* y, int64_t g, const QuantInterleaved& pk2,
                                      float* y2, int64_t g2) {
  static_assert(NG == 1 || NG == 2);
  TARMAC_DCHECK(NG == 1 || (pk2.type() == pk.type() && pk2.blocks() == pk.blocks()));
  constexpr DType kT = kQ8 ? DType::kQ8_0 : DType::kQ4_0;
  const int64_t nb = pk.blocks();
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();  // acc1: group g2 of pk2
  for (int64_t b = 0; b < nb; ++b) {
    const auto* xb = reinterpret_cast<const int32_t*>(xq + b * kQB);
    const uint8_t *p0, *p1;
    const uint16_t *sc0, *sc1;
    UnitBlock<kT>(pk, pf, g, b, &p0, &sc0);
    if constexpr (NG == 2) UnitBlock<kT>(pk2, pf, g2, b, &p1, &sc1);
    acc0 = FoldBlock(BlockSums<kQ8>(p0, xb, corr[b]), sc0, dx[b], acc0);
    if constexpr (NG == 2) acc1 = FoldBlock(BlockSums<kQ8>(p1, xb, corr[b]), sc1, dx[b], acc1);
  }
  auto store = [](__m512 acc, float* out, int64_t grp, int64_t rows) TARMAC_TARGET_VNNI_VBMI {
    const int64_t r0 = grp * QuantInterleaved::kRows;
    const int64_t n = std::min<int64_t>(QuantInterleaved::kRows, rows - r0);
    _mm512_mask_storeu_ps(out + r0, static_cast<__mmask16>((1u << n) - 1), acc);
  };
  store(acc0, y, g, pk.rows());
  if constexpr (NG == 2) store(acc1, y2, g2, pk2.rows());
}

// Row groups [g0, g1) for one token, two at a time; with a partner (pk2, y2), group g of each
// as the two streams.
template <bool kQ8>
void GroupsInterleaved(const QuantInterleaved& pk, const StreamPrefetch& pf, const int8_t* xq,
                       const float* dx, const int32_t* corr, float* y, int64_t g0, int64_t g1,
                       const mv8_internal::Partner& partner = {}) {
  TARMAC_DCHECK(pk.type() == (kQ8 ? DType::kQ8_0 : DType::kQ4_0));
  if (partner.pk != nullptr) {
    for (int64_t g = g0; g < g1; ++g) {
      GroupRun<kQ8, 2>(pk, pf, xq, dx, corr, y, g, *partner.pk, partner.y, g);
    }
    return;
  }
  int64_t g = g0;
  for (; g + 1 < g1; g += 2) GroupRun<kQ8, 2>(pk, pf, xq, dx, corr, y, g, pk, y, g + 1);
  if (g < g1) GroupRun<kQ8, 1>(pk, pf, xq, dx, corr, y, g, pk, y, g);
}

// NT tokens (2..8) at once over the same row groups: each weight vector is loaded once and
// multiplied with every token's broadcast x, so a decode batch or a speculative verification
// of up to 8 tokens streams the matrix once. Per token the integers and the f32 order are the
// single-token kernel's (bit-identical to MatMulInt8Ref). xq/dx/corr: token t at
// xq + t·x_stride, dx/corr + t·nb. y: token t's row r at y[t·y_stride + r].
template <bool kQ8, int NT>
TARMAC_TARGET_VNNI_VBMI void GroupsInterleavedMulti(const QuantInterleaved& pk,
                                                    const StreamPrefetch& pf, const int8_t* xq,
                                                    int64_t x_stride, const float* dx,
                                                    const int32_t* corr, float* y,
                                                    int64_t y_stride, int64_t g0, int64_t g1) {
  const __m512i nib = _mm512_set1_epi8(0x0f);
  const __m512i shr4 = _mm512_set1_epi64(0x1020408000000000LL);  // byte >> 4 (GroupsInterleaved)
  const int64_t nb = pk.blocks();
  constexpr DType kT = kQ8 ? DType::kQ8_0 : DType::kQ4_0;
  TARMAC_DCHECK(pk.type() == kT);
  for (int64_t g = g0; g < g1; ++g) {
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p;
      const uint16_t* sc;
      UnitBlock<kT>(pk, pf, g, b, &p, &sc);
      __m512i isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = _mm512_set1_epi32(corr[t * nb + b]);
      for (int s = 0; s < 8; ++s) {
        __m512i wv;
        if constexpr (kQ8) {
          wv = _mm512_load_si512(p + 64 * s);  // unsigned bytes qs + 128
        } else {
          const __m512i raw = _mm512_load_si512(p + 64 * (s % 4));
          wv = s < 4 ? _mm512_and_si512(raw, nib) : _mm512_gf2p8affine_epi64_epi8(raw, shr4, 0);
        }
        for (int t = 0; t < NT; ++t) {
          const auto* xb = reinterpret_cast<const int32_t*>(xq + t * x_stride + b * kQB);
          isum[t] = _mm512_dpbusd_epi32(isum[t], wv, _mm512_set1_epi32(xb[s]));
        }
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sc)));
      for (int t = 0; t < NT; ++t) {
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * nb + b]));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), scale, acc[t]);
      }
    }
    const int64_t n = std::min<int64_t>(QuantInterleaved::kRows, pk.rows() - g * QuantInterleaved::kRows);
    const auto mask = static_cast<__mmask16>((1u << n) - 1);
    for (int t = 0; t < NT; ++t) {
      _mm512_mask_storeu_ps(y + t * y_stride + g * QuantInterleaved::kRows, mask, acc[t]);
    }
  }
}

// Tokens [t0, t0 + nt) (nt <= 8) of row groups [g0, g1), dispatched to the instantiation.
template <bool kQ8>
void GroupsInterleavedTokens(const QuantInterleaved& pk, const StreamPrefetch& pf, int nt,
                             const int8_t* xq, int64_t x_stride, const float* dx,
                             const int32_t* corr, float* y, int64_t y_stride, int64_t g0,
                             int64_t g1) {
  switch (nt) {
#define TARMAC_MV8_CASE(N)                                                                    \
  case N:                                                                                     \
    return GroupsInterleavedMulti<kQ8, N>(pk, pf, xq, x_stride, dx, corr, y, y_stride, g0, g1);
    TARMAC_MV8_CASE(2)
    TARMAC_MV8_CASE(3)
    TARMAC_MV8_CASE(4)
    TARMAC_MV8_CASE(5)
    TARMAC_MV8_CASE(6)
    TARMAC_MV8_CASE(7)
    TARMAC_MV8_CASE(8)
#undef TARMAC_MV8_CASE
    default:
      TARMAC_CHECK(nt == 1);
      return GroupsInterleaved<kQ8>(pk, pf, xq, dx, corr, y, g0, g1);
  }
}

// ys[i] = ws[i] · x for matrices with QuantInterleaved copies of one type and width: x is
// quantized once and one parallel region covers all their row groups (their concatenation,
// split in contiguous chunks). With glu (n == 2, gate then up, equal rows): the region covers
// the row groups once, each chunk runs them in both matrices (one token: group g of each as
// the two streams) and then applies *glu to its rows of ys[0] (MatVecInt8Glu).
void InterleavedProducts(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                         int64_t n_tokens, ThreadPool* pool, const GluKind* glu = nullptr,
                         std::optional<Isa> pass_override = std::nullopt) {
  const DType type = ws[0]->type;
  const int64_t nb = ws[0]->cols / kQB;
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= kInterleavedMaxTokens);
  // Per token: nb·32 quants, then (all tokens) nb dx, nb corr, nb sums each.
  thread_local AlignedBuffer xbuf;
  const int64_t x_stride = (nb * kQB + 63) / 64 * 64;
  const size_t need = static_cast<size_t>(n_tokens * (x_stride + nb * 12));
  if (xbuf.size() < need) xbuf.Resize(need);
  auto* xq = xbuf.as<int8_t>();
  auto* dx = reinterpret_cast<float*>(xbuf.data() + n_tokens * x_stride);
  auto* corr = reinterpret_cast<int32_t*>(dx + n_tokens * nb);
  float* sums = reinterpret_cast<float*>(corr + n_tokens * nb);
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeActivationsQ8(x + t * ws[0]->cols, nb * kQB, WeightOffset(type), xq + t * x_stride,
                          dx + t * nb, corr + t * nb, sums + t * nb);
  }
  TARMAC_CHECK(n >= 1 && n <= SharedRanges::kMax);
  const QuantInterleaved* pk[SharedRanges::kMax];
  int64_t groups[SharedRanges::kMax];
  for (int i = 0; i < n; ++i) {
    pk[i] = PreparedAs<QuantInterleaved>(*ws[i]);
    TARMAC_DCHECK(pk[i]->Matches(*ws[i]) && ws[i]->type == type && ws[i]->cols == ws[0]->cols);
    groups[i] = pk[i]->groups();
  }
  const SharedRanges ranges(groups, n);  // the matrices' row groups, one after another
  const bool q8 = type == DType::kQ8_0;
  const Isa pass = pass_override.value_or(InterleavedPass(type, n_tokens));
  const bool avx512 = pass == Isa::kAvx512;
  const bool vnni256 = pass == Isa::kAvx2Vnni;
  const StreamPrefetch pf512 = ChooseStreamPrefetch(Isa::kAvx512);
  const StreamPrefetch pf256 = ChooseStreamPrefetch(vnni256 ? Isa::kAvx2Vnni : Isa::kAvx2);
  auto products = [&](int i, int64_t a, int64_t b) {
    if (!avx512) {  // (never Q4_K: the AVX-512 kernel has no mins)
      mv8_internal::InterleavedGroupsAvx2(*pk[i], vnni256, pf256, n_tokens, xq, x_stride, dx,
                                          corr, sums, ys[i], ws[i]->rows, a, b);
      return;
    }
    // Up to 8 tokens per pass over the rows (registers: an int32 and an f32 accumulator per
    // token).
    for (int64_t t0 = 0; t0 < n_tokens; t0 += 8) {
      const int nt = static_cast<int>(std::min<int64_t>(8, n_tokens - t0));
      const int64_t rows = ws[i]->rows;
      if (q8) {
        GroupsInterleavedTokens<true>(*pk[i], pf512, nt, xq + t0 * x_stride, x_stride,
                                      dx + t0 * nb, corr + t0 * nb, ys[i] + t0 * rows, rows, a, b);
      } else {
        GroupsInterleavedTokens<false>(*pk[i], pf512, nt, xq + t0 * x_stride, x_stride,
                                       dx + t0 * nb, corr + t0 * nb, ys[i] + t0 * rows, rows, a, b);
      }
    }
  };
  // The gated pair's groups [a, b): one token walks gate's group g and up's as its two streams
  // (each runs on into the next call's group); more tokens take one matrix at a time.
  auto paired = [&](int64_t a, int64_t b) {
    const mv8_internal::Partner up{pk[1], ys[1]};
    if (!avx512) {
      return mv8_internal::InterleavedGroupsAvx2(*pk[0], vnni256, pf256, n_tokens, xq, x_stride,
                                                 dx, corr, sums, ys[0], ws[0]->rows, a, b, up);
    }
    if (n_tokens > 1) {
      products(0, a, b);
      return products(1, a, b);
    }
    if (q8) return GroupsInterleaved<true>(*pk[0], pf512, xq, dx, corr, ys[0], a, b, up);
    GroupsInterleaved<false>(*pk[0], pf512, xq, dx, corr, ys[0], a, b, up);
  };
  TARMAC_CHECK(glu == nullptr || (n == 2 && ws[0]->rows == ws[1]->rows));
  auto run = [&](int64_t g0, int64_t g1, int) {
    if (glu == nullptr) return ranges.ForEach(g0, g1, products);
    paired(g0, g1);
    const int64_t rows = ws[0]->rows, kR = QuantInterleaved::kRows;
    const int64_t r0 = g0 * kR, r1 = std::min(rows, g1 * kR);
    for (int64_t t = 0; t < n_tokens; ++t) {
      float* g = ys[0] + t * rows + r0;
      ApplyGlu(*glu, g, ys[1] + t * rows + r0, g, r1 - r0);
    }
  };
  const int64_t total = glu != nullptr ? groups[0] : ranges.total();
  const int threads = pool ? pool->num_threads() : 1;
  if (threads == 1 || total < 2) {
    run(0, total, 0);
    return;
  }
  // Shrinking contiguous chunks: each thread's stream restarts a few times, and the thread on
  // the slower CPU is not left with a quarter of the matrix at the end (uniform chunks, two per
  // thread, left one thread idle ~11% of a decode; bench/NOTES.md). Groups of 16 rows; a
  // chunk of at least 4 keeps the prefetch stream's warm-up small (an item of the gated
  // region is a group of each matrix).
  pool->ParallelForGuided(total, glu != nullptr ? 2 : 4, run);
}

#endif  // TARMAC_MV8_X86

}  // namespace

bool IsInt8MatVecType(DType type) { return type == DType::kQ8_0 || type == DType::kQ4_0; }

bool Int8MatVecFast() {
#if TARMAC_MV8_X86
  return IsaAtLeast(Isa::kAvx512) && Cpu().avx512vbmi && Cpu().gfni;
#else
  return false;
#endif
}

bool InterleavedInt8Available() {
#if TARMAC_MV8_X86
  return IsaAtLeast(Isa::kAvx2);
#else
  return false;
#endif
}

bool CanFuseMatVecInt8(const MatrixView* const* ws, int n) {
  if (n < 1 || n > 4 || !InterleavedInt8Available()) return false;
  for (int i = 0; i < n; ++i) {
    if (PreparedAs<QuantInterleaved>(*ws[i]) == nullptr || !QuantInterleaved::Supports(ws[i]->type) ||
        ws[i]->type != ws[0]->type || ws[i]->cols != ws[0]->cols || ws[i]->rows == 0) {
      return false;
    }
  }
  return true;
}

void MatVecInt8Fused(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tokens, ThreadPool* pool) {
  TARMAC_CHECK(CanFuseMatVecInt8(ws, n));
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= kInterleavedMaxTokens);
#if TARMAC_MV8_X86
  InterleavedProducts(ws, ys, n, x, n_tokens, pool);
#endif
}

void MatVecInt8Glu(const MatrixView& w_gate, const MatrixView& w_up, const float* x,
                   int64_t n_tokens, GluKind kind, float* gate, float* up, ThreadPool* pool) {
  const MatrixView* ws[2] = {&w_gate, &w_up};
  TARMAC_CHECK(CanFuseMatVecInt8(ws, 2) && w_gate.rows == w_up.rows);
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= kInterleavedMaxTokens);
#if TARMAC_MV8_X86
  float* ys[2] = {gate, up};
  InterleavedProducts(ws, ys, 2, x, n_tokens, pool, &kind);
#else
  (void)x, (void)kind, (void)gate, (void)up, (void)pool;
#endif
}

namespace mv8_internal {

void InterleavedProductsOnPass(const MatrixView* const* ws, float* const* ys, int n,
                               const float* x, int64_t n_tokens, Isa pass, ThreadPool* pool,
                               const GluKind* glu) {
  TARMAC_CHECK(CanFuseMatVecInt8(ws, n) && n_tokens >= 1 && n_tokens <= kInterleavedMaxTokens);
  TARMAC_CHECK(pass == Isa::kAvx2 || (pass == Isa::kAvx2Vnni && Cpu().avx_vnni) ||
               (pass == Isa::kAvx512 && Int8MatVecFast() && ws[0]->type != DType::kQ4_K));
#if TARMAC_MV8_X86
  InterleavedProducts(ws, ys, n, x, n_tokens, pool, glu, pass);
#else
  (void)ys, (void)x, (void)pool, (void)glu;
#endif
}

}  // namespace mv8_internal

void MatVecInt8(const MatrixView& w, const float* x, float* y, ThreadPool* pool) {
  TARMAC_CHECK(IsInt8MatVecType(w.type) || PreparedAs<QuantInterleaved>(w) != nullptr);
  TARMAC_CHECK(w.rows >= 0 && w.cols >= 0 && w.cols % Traits(w.type).block_size == 0);
  TARMAC_CHECK(w.rows <= 1 || w.row_stride >= RowBytes(w.type, w.cols));
#if TARMAC_MV8_X86
  if (w.rows == 0) return;
  if (PreparedAs<QuantInterleaved>(w) != nullptr && InterleavedInt8Available()) {
    const MatrixView* ws[1] = {&w};
    float* ys[1] = {y};
    return InterleavedProducts(ws, ys, 1, x, 1, pool);
  }
  if (!Int8MatVecFast()) return MatMulInt8(w, x, 1, y, pool);
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t nb = w.cols / kQB;
  const int64_t ng = nb / kGroupBlocks, nt = nb % kGroupBlocks;
  // Per calling thread, only grows: decode steps allocate nothing once warm.
  thread_local AlignedBuffer buf;
  const size_t need = static_cast<size_t>(std::max<int64_t>(ng, 1)) * sizeof(XGroup);
  if (buf.size() < need) buf.Resize(need);
  auto* groups = buf.as<XGroup>();
  XTail tail{};
  const int offset = WeightOffset(w.type);
  QuantizeX(x, nb, offset, groups, &tail);
  const bool q8 = w.type == DType::kQ8_0;
  auto run = [&](int64_t r0, int64_t r1, int) {
    if (q8) {
      RowsVnni<true>(w, groups, ng, tail, nt, y, r0, r1);
    } else {
      RowsVnni<false>(w, groups, ng, tail, nt, y, r0, r1);
    }
  };
  if (threads == 1 || w.rows < 2) {
    run(0, w.rows, 0);
    return;
  }
  // Contiguous chunks (sequential reads per thread), a few per thread for balance.
  const int64_t grain = std::max<int64_t>(1, w.rows / (threads * 8));
  pool->ParallelFor(w.rows, grain, run);
#else
  MatMulInt8(w, x, 1, y, pool);
#endif
}

}  // namespace tarmac::kernels
