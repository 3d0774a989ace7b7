// Products of the other block types with int8 activations on AVX2 (see matvec_blocks.h).

#include "kernels/matvec_blocks.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/block_decode_unit-inl.h"
#include "kernels/avx2_reduce-inl.h"
#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"
#include "kernels/matmul_int8.h"
#include "kernels/stream_prefetch.h"
#include "tensor/aligned_buffer.h"
#include "tensor/quant_ref.h"

#if defined(TARMAC_BLOCKS_TARGET_AVX2)
#define TARMAC_BLOCKS_X86 1
#else
#define TARMAC_BLOCKS_X86 0
#endif

namespace tarmac::kernels {
namespace {

using blocks_internal::kQB;    // activation block width
using blocks_internal::kUnit;  // weights per decoded unit

// The types whose products run in integers over a whole super-block (integer sub-block
// scales): their activations are quantized per 256 (one scale per super-block, as llama.cpp's
// Q8_K), so the super-block's sums stay exact int32 and convert to float once.
bool K256Activations(DType t) {
  return t == DType::kQ2_K || t == DType::kQ3_K || t == DType::kQ5_K || t == DType::kIQ4_XS;
}

// x[0..n) quantized per 256: q = round_to_nearest_even(x / d), d = max|x| / 127 per 256 (0 for
// a zero block), bsum[g] = sum of q over elements 16g .. 16g + 15. n % 256 == 0.
void QuantizeActivationsK256(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsum) {
  for (int64_t u = 0; u < n / kUnit; ++u) {
    const float* xu = x + kUnit * u;
    float amax = 0.0f;
    for (int64_t e = 0; e < kUnit; ++e) amax = std::max(amax, std::fabs(xu[e]));
    d[u] = amax / 127.0f;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t e = 0; e < kUnit; ++e) {
      q[kUnit * u + e] = static_cast<int8_t>(std::clamp(std::nearbyint(xu[e] * id), -127.0f, 127.0f));
    }
    for (int64_t g = 0; g < kUnit / 16; ++g) {
      int sum = 0;
      for (int e = 0; e < 16; ++e) sum += q[kUnit * u + 16 * g + e];
      bsum[(kUnit / 16) * u + g] = static_cast<int16_t>(sum);
    }
  }
}

// One call's quantized activations, per token t: q at q + t·q_stride (K bytes, padded to a
// whole unit with zeros); per-32 quantization: the block scales at dx + t·nb and the sums of q
// over each 16 elements at qsum + t·ng (ng = K / 16); per-256 (K256Activations): the unit
// scales at d8 + t·units and the int16 sums of q per 16 at bsum + t·ng.
struct Acts {
  const int8_t* q;
  int64_t q_stride;
  const float* dx;
  int64_t nb;
  const float* qsum;
  int64_t ng;
  const float* d8;
  const int16_t* bsum;
  int64_t units;
};

// The quantization above, into a per-thread buffer that only grows (decode steps allocate
// nothing once warm); valid until the same thread quantizes again.
Acts QuantizeTokens(const float* x, int64_t n_tokens, int64_t cols, bool k256) {
  const int64_t nb = cols / kQB, ng = cols / 16;
  const int64_t units = (cols + kUnit - 1) / kUnit;
  const int64_t q_stride = units * kUnit;
  const int64_t per_token = q_stride + 4 * nb + 4 * ng + 4 * units + 2 * ng;
  thread_local AlignedBuffer buf;
  // + 2·nb floats of scratch below, + 16 floats: a row's last unit of 32-blocks may hold fewer
  // than 8 blocks, and its offset pass reads (and masks off) a whole unit's worth.
  const size_t need = static_cast<size_t>(n_tokens * per_token + 8 * nb + 64);
  if (buf.size() < need) buf.Resize(need);
  auto* q = buf.as<int8_t>();
  auto* dx = reinterpret_cast<float*>(buf.data() + n_tokens * q_stride);
  auto* qsum = dx + n_tokens * nb;
  auto* d8 = qsum + n_tokens * ng;
  auto* bsum = reinterpret_cast<int16_t*>(d8 + n_tokens * units);
  auto* corr = reinterpret_cast<int32_t*>(bsum + n_tokens * ng);  // scratch, unread
  auto* s = reinterpret_cast<float*>(corr + nb);                  // scratch, unread
  for (int64_t t = 0; t < n_tokens; ++t) {
    int8_t* qt = q + t * q_stride;
    std::fill(qt + cols, qt + q_stride, int8_t{0});
    if (k256) {
      QuantizeActivationsK256(x + t * cols, cols, qt, d8 + t * units, bsum + t * ng);
      continue;
    }
    QuantizeActivationsQ8(x + t * cols, cols, 0, qt, dx + t * nb, corr, s);
    for (int64_t g = 0; g < ng; ++g) {
      int sum = 0;
      for (int e = 0; e < 16; ++e) sum += qt[16 * g + e];
      qsum[t * ng + g] = static_cast<float>(sum);
    }
  }
  return {q, q_stride, dx, nb, qsum, ng, d8, bsum, units};
}

#if TARMAC_BLOCKS_X86
using blocks_internal::DecodeUnit;
using blocks_internal::Unit;


// acc += the unit's products with one token's activations of the unit (q, dx), a scale per
// group of 16.
TARMAC_BLOCKS_TARGET_AVX2 __attribute__((always_inline)) inline void UnitDotGroups(
    const Unit& un, const int8_t* q, const float* dx, __m256& acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  // s_g · d_x of every group at once (d_x is per pair of groups).
  const __m256i pair_lo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256 dx_lo = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(dx)), pair_lo);
  const __m256 dx_hi = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(dx + 4)), pair_lo);
  alignas(32) float sdx[16];
  _mm256_store_ps(sdx, _mm256_mul_ps(_mm256_load_ps(un.s), dx_lo));
  _mm256_store_ps(sdx + 8, _mm256_mul_ps(_mm256_load_ps(un.s + 8), dx_hi));
  for (int c = 0; c < un.chunks; ++c) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + kQB * c));
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(un.w[c], un.w[c]),
                                           _mm256_sign_epi8(xv, un.w[c]));
    const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
    // Lanes 0..3 hold the first 16 weights' sums, 4..7 the second's.
    const __m256 sv = _mm256_set_m128(_mm_broadcast_ss(sdx + 2 * c + 1), _mm_broadcast_ss(sdx + 2 * c));
    acc = _mm256_fmadd_ps(isum, sv, acc);
  }
}

// off += the unit's offset terms: per 16-weight group o_g · d_x · sum q, over its 2 · chunks
// groups.
TARMAC_BLOCKS_TARGET_AVX2 __attribute__((always_inline)) inline void UnitOffsets(
    const Unit& un, const float* dx, const float* qsum, __m256& off) {
  for (int g0 = 0; g0 < 2 * un.chunks; g0 += 8) {
    const __m256 o = _mm256_load_ps(un.o + g0);
    const __m256 qs = _mm256_loadu_ps(qsum + g0);
    const __m256i pair = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256 d = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(dx + g0 / 2)), pair);
    const int live = std::min(8, 2 * un.chunks - g0);
    const __m256 mask = _mm256_castsi256_ps(_mm256_cmpgt_epi32(
        _mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    // Masked on both sides: past the row's end o and qsum are not this row's (maybe NaN).
    off = _mm256_fmadd_ps(_mm256_and_ps(_mm256_mul_ps(o, d), mask), _mm256_and_ps(qs, mask), off);
  }
}

// acc += the unit's products with one token's activations (q, dx per 32, qsum per 16); off +=
// its offset terms. kOneScale: the unit's type has one scale per chunk of 32 (both groups' s
// equal), so a chunk takes one scale product.
template <bool kOneScale>
TARMAC_BLOCKS_TARGET_AVX2 __attribute__((always_inline)) inline void UnitDot(
    const Unit& un, const int8_t* q, const float* dx, const float* qsum, __m256& acc,
    __m256& off) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kOneScale) {
    __m256 acc2 = _mm256_setzero_ps();  // odd chunks: two FMA chains
    for (int c = 0; c < un.chunks; ++c) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + kQB * c));
      const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(un.w[c], un.w[c]),
                                             _mm256_sign_epi8(xv, un.w[c]));
      const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
      const __m256 sv = _mm256_set1_ps(un.s[2 * c] * dx[c]);
      if (c % 2 == 0) {
        acc = _mm256_fmadd_ps(isum, sv, acc);
      } else {
        acc2 = _mm256_fmadd_ps(isum, sv, acc2);
      }
    }
    acc = _mm256_add_ps(acc, acc2);
  } else {
    UnitDotGroups(un, q, dx, acc);
  }
  if (un.offsets) UnitOffsets(un, dx, qsum, off);
}

// The types whose decoded units have one scale per chunk of 32 (both its groups' s equal).
template <DType kT>
constexpr bool kOneScalePerChunk =
    kT == DType::kQ4_1 || kT == DType::kQ5_0 || kT == DType::kQ5_1 || kT == DType::kIQ4_NL ||
    kT == DType::kMXFP4 || kT == DType::kTQ1_0 || kT == DType::kTQ2_0 || kT == DType::kIQ2_XXS ||
    kT == DType::kIQ3_XXS || kT == DType::kIQ3_S || kT == DType::kIQ1_S;

// One token of a symmetric 32-element type (Q5_0, IQ4_NL, MXFP4) over a row of `cols` weights:
// each block decoded straight into registers and dotted, with no Unit in between; the same
// operations in the same order as UnitDot<true> over the row's units (two FMA chains per unit,
// joined at its end), so the result equals the batched one.
template <DType kT>
TARMAC_BLOCKS_TARGET_AVX2 __attribute__((always_inline)) inline float RowOneToken32(
    const uint8_t* row, int64_t cols, const Acts& a, const StreamPrefetch& pf) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t nb = cols / kQB, block_bytes = Traits(kT).type_size;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i0 = 0; i0 < nb; i0 += kUnit / kQB) {
    PrefetchSpan(pf, row + i0 * block_bytes, (kUnit / kQB) * block_bytes);
    const int64_t end = std::min<int64_t>(nb, i0 + kUnit / kQB);
    __m256 acc2 = _mm256_setzero_ps();
    for (int64_t i = i0; i < end; ++i) {
      __m256i wv;
      float s, o;
      blocks_internal::DecodeBlock32<kT>(row, i, &wv, &s, &o);
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + kQB * i));
      const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
      const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
      const __m256 sv = _mm256_set1_ps(s * a.dx[i]);
      if ((i - i0) % 2 == 0) {
        acc = _mm256_fmadd_ps(isum, sv, acc);
      } else {
        acc2 = _mm256_fmadd_ps(isum, sv, acc2);
      }
    }
    acc = _mm256_add_ps(acc, acc2);
  }
  return HorizontalSumAvx2(_mm256_add_ps(acc, _mm256_setzero_ps()));
}

// Rows [r0, r1) of w, every token: each unit decoded once, then dotted with each token.
template <DType kT>
TARMAC_BLOCKS_TARGET_AVX2 void RowsT(const MatrixView& w, const Acts& a, const StreamPrefetch& pf,
                                     int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  const int64_t units = (w.cols + kUnit - 1) / kUnit;
  const int64_t unit_bytes = RowBytes(kT, std::min<int64_t>(kUnit, w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    if constexpr (kT == DType::kQ5_0 || kT == DType::kIQ4_NL || kT == DType::kMXFP4) {
      if (n_tokens == 1) {
        y[r] = RowOneToken32<kT>(row, w.cols, a, pf);
        continue;
      }
    }
    if (n_tokens == 1) {
      // One token: the accumulators stay in registers (an array indexed by token keeps them
      // in memory, and each FMA then waits on a store-to-load round trip).
      __m256 acc = _mm256_setzero_ps(), off = _mm256_setzero_ps();
      for (int64_t u = 0; u < units; ++u) {
        PrefetchSpan(pf, row + u * unit_bytes, unit_bytes);
        Unit un;
        DecodeUnit<kT>(row, u, w.cols, &un);
        UnitDot<kOneScalePerChunk<kT>>(un, a.q + kUnit * u, a.dx + 8 * u, a.qsum + 16 * u, acc, off);
      }
      y[r] = HorizontalSumAvx2(_mm256_add_ps(acc, off));
      continue;
    }
    __m256 acc[kBlocksMaxTokens], off[kBlocksMaxTokens];
    for (int64_t t = 0; t < n_tokens; ++t) acc[t] = off[t] = _mm256_setzero_ps();
    for (int64_t u = 0; u < units; ++u) {
      PrefetchSpan(pf, row + u * unit_bytes, unit_bytes);
      Unit un;
      DecodeUnit<kT>(row, u, w.cols, &un);
      for (int64_t t = 0; t < n_tokens; ++t) {
        __m256 at = acc[t], ot = off[t];
        UnitDot<kOneScalePerChunk<kT>>(un, a.q + t * a.q_stride + kUnit * u,
                                       a.dx + t * a.nb + 8 * u, a.qsum + t * a.ng + 16 * u, at, ot);
        acc[t] = at;
        off[t] = ot;
      }
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      y[t * w.rows + r] = HorizontalSumAvx2(_mm256_add_ps(acc[t], off[t]));
    }
  }
}

// The kKInts types: each super-block's sums of w·q scaled by the integer sub-block scales
// stay int32 (|lane| < 2^25 for every type), then one float product per super-block and token:
//   y += d_w · d_8 · sum_g sc_g · sum_{e in g} w_e q_e  -  dmin · d_8 · sum_g m_g · bsum_g.
template <DType kT>
TARMAC_BLOCKS_TARGET_AVX2 void RowsKT(const MatrixView& w, const Acts& a, const StreamPrefetch& pf,
                                      int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  const int64_t units = w.cols / kUnit;
  const int64_t unit_bytes = RowBytes(kT, kUnit);
  // Chunk c's groups 2c, 2c + 1 in the dword-duplicated scales below (see the unpacks).
  alignas(32) static constexpr int32_t kPick[8][8] = {
      {0, 0, 0, 0, 1, 1, 1, 1}, {2, 2, 2, 2, 3, 3, 3, 3}, {0, 0, 0, 0, 1, 1, 1, 1},
      {2, 2, 2, 2, 3, 3, 3, 3}, {4, 4, 4, 4, 5, 5, 5, 5}, {6, 6, 6, 6, 7, 7, 7, 7},
      {4, 4, 4, 4, 5, 5, 5, 5}, {6, 6, 6, 6, 7, 7, 7, 7}};
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m256 acc[kBlocksMaxTokens];
    for (int64_t t = 0; t < n_tokens; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t u = 0; u < units; ++u) {
      PrefetchSpan(pf, row + u * unit_bytes, unit_bytes);
      __m256i wv[8];
      const blocks_internal::KScales k = blocks_internal::DecodeKInts<kT>(row, u, wv);
      // Scales as int16, each duplicated into a dword: lo holds groups 0-3 and 8-11, hi 4-7
      // and 12-15; chunk c takes its two groups' dwords from lo (c % 4 < 2) or hi.
      const __m256i s16 = _mm256_cvtepi8_epi16(k.sc);
      const __m256i lo = _mm256_unpacklo_epi16(s16, s16), hi = _mm256_unpackhi_epi16(s16, s16);
      __m256i scv[8];
      for (int c = 0; c < 8; ++c) {
        scv[c] = _mm256_permutevar8x32_epi32(
            c % 4 < 2 ? lo : hi, _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick[c])));
      }
      const __m256i m16 = _mm256_cvtepi8_epi16(k.m);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const int8_t* q = a.q + t * a.q_stride + kUnit * u;
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + kQB * c));
          __m256i p;
          if constexpr (blocks_internal::kUnsignedInts<kT>) {
            p = _mm256_maddubs_epi16(wv[c], xv);
          } else {
            p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv[c], wv[c]), _mm256_sign_epi8(xv, wv[c]));
          }
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scv[c]));
        }
        const float d8 = a.d8[t * a.units + u];
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(k.d * d8), acc[t]);
        if (k.mins) {
          const __m256i bs =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsum + t * a.ng + 16 * u));
          const __m256 mi = _mm256_cvtepi32_ps(_mm256_madd_epi16(bs, m16));
          acc[t] = _mm256_fnmadd_ps(mi, _mm256_set1_ps(k.dmin * d8), acc[t]);
        }
      }
    }
    for (int64_t t = 0; t < n_tokens; ++t) y[t * w.rows + r] = HorizontalSumAvx2(acc[t]);
  }
}

using RowsFn = void (*)(const MatrixView&, const Acts&, const StreamPrefetch&, int64_t, float*,
                        int64_t, int64_t);

RowsFn RowsFor(DType t) {
  RowsFn fn = nullptr;
  blocks_internal::WithBlocksType(t, [&fn](auto kT) {
    constexpr DType kType = decltype(kT)::value;
    if constexpr (blocks_internal::kKInts<kType>) {
      fn = RowsKT<kType>;
    } else {
      fn = RowsT<kType>;
    }
  });
  return fn;
}
#endif  // TARMAC_BLOCKS_X86

void CheckShape(const MatrixView& w, int64_t n_tokens) {
  TARMAC_CHECK(MatVecBlocksSupports(w.type));
  TARMAC_CHECK(w.rows >= 0 && w.cols >= 0 && w.cols % Traits(w.type).block_size == 0);
  TARMAC_CHECK(w.rows <= 1 || w.row_stride >= RowBytes(w.type, w.cols));
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= kBlocksMaxTokens);
}

}  // namespace

bool MatVecBlocksSupports(DType type) {
#if TARMAC_BLOCKS_X86
  return blocks_internal::WithBlocksType(type, [](auto) {});
#else
  (void)type;
  return false;
#endif
}

bool MatVecBlocksAvailable() { return TARMAC_BLOCKS_X86 && Cpu().x86 && IsaAtLeast(Isa::kAvx2); }

void MatVecBlocks(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool* pool) {
  CheckShape(w, n_tokens);
  TARMAC_CHECK(MatVecBlocksAvailable());
  if (w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
#if TARMAC_BLOCKS_X86
  const Acts a = QuantizeTokens(x, n_tokens, w.cols, K256Activations(w.type));
  const StreamPrefetch pf = ChooseStreamPrefetch(Isa::kAvx2);
  const RowsFn rows = RowsFor(w.type);
  auto run = [&](int64_t r0, int64_t r1, int) { rows(w, a, pf, n_tokens, y, r0, r1); };
  const int threads = pool ? pool->num_threads() : 1;
  if (threads == 1 || w.rows < 2) {
    run(0, w.rows, 0);
    return;
  }
  pool->ParallelForGuided(w.rows, 16, run);
#endif
}

void MatVecBlocksRef(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  CheckShape(w, n_tokens);
  const int64_t K = w.cols;
  const bool k256 = K256Activations(w.type);
  std::vector<int8_t> q(K);
  std::vector<float> dx(K / kQB), d8(K / kUnit + 1), wf(K);
  std::vector<int16_t> bsum(K / 16);
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (k256) {
      QuantizeActivationsK256(x + t * K, K, q.data(), d8.data(), bsum.data());
    } else {
      QuantizeActivationsQ8Ref(x + t * K, K, q.data(), dx.data());
    }
    for (int64_t r = 0; r < w.rows; ++r) {
      DequantizeRowRef(w.type, w.row(r), wf.data(), K);
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double xq = (k256 ? double(d8[k / kUnit]) : double(dx[k / kQB])) * q[k];
        acc += double(wf[k]) * xq;
      }
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace tarmac::kernels
