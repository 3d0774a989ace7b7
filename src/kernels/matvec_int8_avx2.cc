// AVX2 / AVX-VNNI products on interleaved Q8_0 / Q4_0 weights (see matvec_int8_avx2.h).

#include "kernels/matvec_int8_avx2.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TARMAC_MV8A_X86 1
#include <immintrin.h>
#define TARMAC_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TARMAC_TARGET_AVX2_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#else
#define TARMAC_MV8A_X86 0
#endif

namespace tarmac::kernels::mv8_internal {

#if TARMAC_MV8A_X86
namespace {

constexpr int64_t kQB = 32;
constexpr int64_t kRows = QuantInterleaved::kRows;
// The activations' per-block arrays (InterleavedGroupsAvx2), [token][block].
struct Acts {
  const float* dx;
  const int32_t* corr;
  const float* xs;
};

// Q4_0 quants of one k-group of a half (32 bytes at p, 32-aligned): low and high nibbles as
// unsigned bytes (k-groups s and 4 + s).
TARMAC_TARGET_AVX2 inline void Nibbles(const uint8_t* p, __m256i* lo, __m256i* hi) {
  const __m256i nib = _mm256_set1_epi8(0x0f);
  const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  *lo = _mm256_and_si256(raw, nib);
  *hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
}

// One Q8_0 k-group's int32 pair sums for one token: q the weights less 128 (signed), aq = |q|,
// x the token's four activations broadcast.
TARMAC_TARGET_AVX2 inline __m256i Q8Sums(__m256i aq, __m256i q, __m256i x, __m256i ones) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(x, q)), ones);
}

// A half's 8 row results to y[row0 ..], fewer where the matrix ends (rows: its row count).
TARMAC_TARGET_AVX2 inline void StoreRows8(__m256 v, float* y, int64_t row0, int64_t rows) {
  const int64_t n = std::min<int64_t>(8, rows - row0);
  if (n == 8) {
    _mm256_storeu_ps(y + row0, v);
  } else if (n > 0) {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    std::memcpy(y + row0, tmp, n * sizeof(float));
  }
}

// Tokens' integer sums of one block over NH halves (8 rows each): isum[j][t] (int32 per row).
// p: the block's quants at the first half's first byte (k-group s of half j at p + 64·s + 32·j).
// The halves share each activation broadcast.
template <bool kQ8, int NT, int NH>
TARMAC_TARGET_AVX2 inline void BlockSumsAvx2(const uint8_t* p, const int32_t* const* xb,
                                             const int32_t* corr_b, __m256i (*isum)[NT]) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kQ8) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int j = 0; j < NH; ++j)
      for (int t = 0; t < NT; ++t) isum[j][t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      __m256i x[NT];
      for (int t = 0; t < NT; ++t) x[t] = _mm256_set1_epi32(xb[t][s]);
      for (int j = 0; j < NH; ++j) {
        const __m256i q = _mm256_xor_si256(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 64 * s + 32 * j)), flip);
        const __m256i aq = _mm256_sign_epi8(q, q);
        for (int t = 0; t < NT; ++t) {
          isum[j][t] = _mm256_add_epi32(isum[j][t], Q8Sums(aq, q, x[t], ones));
        }
      }
    }
  } else {
    __m256i s16[NH][NT];
    for (int j = 0; j < NH; ++j)
      for (int t = 0; t < NT; ++t) s16[j][t] = _mm256_setzero_si256();
    for (int s = 0; s < 4; ++s) {
      __m256i xl[NT], xh[NT];
      for (int t = 0; t < NT; ++t) {
        xl[t] = _mm256_set1_epi32(xb[t][s]);
        xh[t] = _mm256_set1_epi32(xb[t][4 + s]);
      }
      for (int j = 0; j < NH; ++j) {
        __m256i lo, hi;
        Nibbles(p + 64 * s + 32 * j, &lo, &hi);
        for (int t = 0; t < NT; ++t) {
          s16[j][t] = _mm256_add_epi16(s16[j][t], _mm256_maddubs_epi16(lo, xl[t]));
          s16[j][t] = _mm256_add_epi16(s16[j][t], _mm256_maddubs_epi16(hi, xh[t]));
          // Keeps the sum a chain: GCC otherwise reassociates the 16 adds into a tree and
          // spills its partial sums (bench/NOTES.md). Integer adds: the result is the same.
          asm("" : "+x"(s16[j][t]));
        }
      }
    }
    for (int j = 0; j < NH; ++j)
      for (int t = 0; t < NT; ++t) {
        isum[j][t] =
            _mm256_add_epi32(_mm256_set1_epi32(corr_b[t]), _mm256_madd_epi16(s16[j][t], ones));
      }
  }
}

template <bool kQ8, int NT, int NH>
TARMAC_TARGET_AVX2_VNNI inline void BlockSumsVnni(const uint8_t* p, const int32_t* const* xb,
                                                  const int32_t* corr_b, __m256i (*isum)[NT]) {
  for (int j = 0; j < NH; ++j)
    for (int t = 0; t < NT; ++t) isum[j][t] = _mm256_set1_epi32(corr_b[t]);
  if constexpr (kQ8) {  // unsigned bytes qs + 128, corrected by corr
    for (int s = 0; s < 8; ++s) {
      for (int j = 0; j < NH; ++j) {
        const __m256i w =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 64 * s + 32 * j));
        for (int t = 0; t < NT; ++t) {
          isum[j][t] = _mm256_dpbusd_avx_epi32(isum[j][t], w, _mm256_set1_epi32(xb[t][s]));
        }
      }
    }
  } else {
    for (int s = 0; s < 4; ++s) {
      for (int j = 0; j < NH; ++j) {
        __m256i lo, hi;
        Nibbles(p + 64 * s + 32 * j, &lo, &hi);
        for (int t = 0; t < NT; ++t) {
          isum[j][t] = _mm256_dpbusd_avx_epi32(isum[j][t], lo, _mm256_set1_epi32(xb[t][s]));
          isum[j][t] = _mm256_dpbusd_avx_epi32(isum[j][t], hi, _mm256_set1_epi32(xb[t][4 + s]));
        }
      }
    }
  }
}

// Eight bytes as f32 lanes (Q4_K's 6-bit scales or mins of a half's 8 rows).
TARMAC_TARGET_AVX2 inline __m256 U8ToF32(const uint8_t* q) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}

// NH halves (8 rows each) of group g from half h for NT (2..4) tokens, a half at a time
// (registers; one token takes the OneToken* passes below). prefetch: this pass is the group's
// first (the others find it in cache).
// kMins (Q4_K): block scales d·sc from the super-block's d and 6-bit scales, and the mins
// term fma(-dmin·m, xs, acc) after each block, as MatMulInt8Ref orders it.
#define TARMAC_MV8A_HALF(TARGET, SUMS)                                                         \
  template <bool kQ8, bool kMins, int NT, int NH>                                             \
  TARGET void Half##SUMS(const QuantInterleaved& pk, int64_t g, int h, const int8_t* xq,      \
                         int64_t x_stride, const Acts& a, float* y, int64_t y_stride,         \
                         const StreamPrefetch& pf, bool prefetch) {                           \
    constexpr DType kT = kQ8 ? DType::kQ8_0 : kMins ? DType::kQ4_K : DType::kQ4_0;             \
    constexpr int64_t kU = QuantInterleaved::UnitBlocks(kT);                                  \
    const int64_t nb = pk.blocks();                                                           \
    const uint8_t* grp = pk.group(g);                                                         \
    __m256 acc[NH][NT], dsup[NH], msup[NH];                                                   \
    for (int j = 0; j < NH; ++j) {                                                            \
      dsup[j] = msup[j] = _mm256_setzero_ps(); /* Q4_K: set at each super-block */            \
      for (int t = 0; t < NT; ++t) acc[j][t] = _mm256_setzero_ps();                           \
    }                                                                                         \
    for (int64_t b = 0; b < nb; ++b) {                                                        \
      const int64_t sub = b % kU;                                                             \
      const uint8_t* q = grp + QuantInterleaved::BlockOffset(kT, b);                          \
      const uint8_t* p = q + 32 * h;                                                          \
      /* the unit's scales */                                                                 \
      const uint8_t* us = grp + QuantInterleaved::UnitScalesOffset(kT, b / kU);               \
      if (prefetch) PrefetchInterleavedBlock<kT>(pf, q, b);                                   \
      if constexpr (kMins) {                                                                  \
        if (sub == 0) {                                                                       \
          for (int j = 0; j < NH; ++j) {                                                      \
            const int off = 16 * (h + j);                                                     \
            dsup[j] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(us + off)));  \
            msup[j] = _mm256_cvtph_ps(                                                        \
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(us + 32 + off)));           \
          }                                                                                   \
        }                                                                                     \
      }                                                                                       \
      const int32_t* xb[NT];                                                                  \
      int32_t corr_b[NT];                                                                     \
      for (int t = 0; t < NT; ++t) {                                                          \
        xb[t] = reinterpret_cast<const int32_t*>(xq + t * x_stride + b * kQB);                \
        corr_b[t] = a.corr[t * nb + b];                                                       \
      }                                                                                       \
      __m256i isum[NH][NT];                                                                   \
      SUMS<kQ8, NT, NH>(p, xb, corr_b, isum);                                                 \
      for (int j = 0; j < NH; ++j) {                                                          \
        __m256 dw, mw;                                                                        \
        if constexpr (kMins) {                                                                \
          const uint8_t* s = us + 16 * sub + 8 * (h + j);                                     \
          dw = _mm256_mul_ps(dsup[j], U8ToF32(s + 64));                                       \
          mw = _mm256_mul_ps(msup[j], U8ToF32(s + 192));                                      \
        } else {                                                                              \
          dw = _mm256_cvtph_ps(_mm_loadu_si128(                                               \
              reinterpret_cast<const __m128i*>(grp + QuantInterleaved::ScalesOffset(kT, b) +   \
                                               16 * (h + j))));                               \
          mw = dw;                                                                            \
        }                                                                                     \
        for (int t = 0; t < NT; ++t) {                                                        \
          const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(a.dx[t * nb + b]));           \
          acc[j][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[j][t]), scale, acc[j][t]);      \
          if constexpr (kMins) {                                                              \
            acc[j][t] = _mm256_fnmadd_ps(mw, _mm256_set1_ps(a.xs[t * nb + b]), acc[j][t]);    \
          }                                                                                   \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    for (int j = 0; j < NH; ++j) {                                                            \
      for (int t = 0; t < NT; ++t) {                                                          \
        StoreRows8(acc[j][t], y + t * y_stride, g * kRows + 8 * (h + j), pk.rows());          \
      }                                                                                       \
    }                                                                                         \
  }

TARMAC_MV8A_HALF(TARMAC_TARGET_AVX2, BlockSumsAvx2)
TARMAC_MV8A_HALF(TARMAC_TARGET_AVX2_VNNI, BlockSumsVnni)
#undef TARMAC_MV8A_HALF

// One Q8_0 k-group s of a group's two halves (p: the group's block + 64·s): their int32 sums
// i0, i1 for one token's broadcast activations x.
TARMAC_TARGET_AVX2 inline void Q8Step(const uint8_t* p, __m256i x, __m256i* i0, __m256i* i1) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
  const __m256i q0 = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)), flip);
  const __m256i q1 =
      _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)), flip);
  *i0 = _mm256_add_epi32(*i0, Q8Sums(_mm256_sign_epi8(q0, q0), q0, x, ones));
  *i1 = _mm256_add_epi32(*i1, Q8Sums(_mm256_sign_epi8(q1, q1), q1, x, ones));
}

// One Q4_0 / Q4_K k-group pair (s, 4 + s) of a group's two halves (p: the block + 64·s): their
// int16 sums s0, s1 for one token's broadcast activations xl, xh.
TARMAC_TARGET_AVX2 inline void Q4Step(const uint8_t* p, __m256i xl, __m256i xh, __m256i* s0,
                                      __m256i* s1) {
  __m256i lo, hi;
  Nibbles(p, &lo, &hi);
  *s0 = _mm256_add_epi16(*s0, _mm256_maddubs_epi16(lo, xl));
  *s0 = _mm256_add_epi16(*s0, _mm256_maddubs_epi16(hi, xh));
  Nibbles(p + 32, &lo, &hi);
  *s1 = _mm256_add_epi16(*s1, _mm256_maddubs_epi16(lo, xl));
  *s1 = _mm256_add_epi16(*s1, _mm256_maddubs_epi16(hi, xh));
}

// acc + f32(isum) · (d_w · dx) for one half's 8 rows, d_w the 8 f16 scales at sc.
TARMAC_TARGET_AVX2 inline __m256 FoldBlock(__m256i isum, const uint8_t* sc, __m256 dx, __m256 acc) {
  const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, dx), acc);
}

// Q4_K: a group's super-block d (d0, d1) and dmin (m0, m1) of both halves' rows, as f32.
struct SuperScales {
  __m256 d0, d1, m0, m1;
};

// us: the unit's scales (QuantInterleaved::UnitScalesOffset).
TARMAC_TARGET_AVX2 inline SuperScales LoadSuperScales(const uint8_t* us) {
  auto half = [us](int off) TARMAC_TARGET_AVX2 {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(us + off)));
  };
  return {half(0), half(16), half(32), half(48)};
}

// Q4_K block sub of a unit (sm = us + 16·sub: its 6-bit scales at +64, mins at +192) into
// both halves' accumulators: acc = fma(f32(isum), d·sc · dx, acc), then fma(-dmin·m, xs, acc).
TARMAC_TARGET_AVX2 inline void FoldBlockMins(__m256i i0, __m256i i1, const uint8_t* sm,
                                             const SuperScales& ss, __m256 dx, __m256 xs,
                                             __m256* acc0, __m256* acc1) {
  const __m256 dw0 = _mm256_mul_ps(ss.d0, U8ToF32(sm + 64));
  const __m256 mw0 = _mm256_mul_ps(ss.m0, U8ToF32(sm + 192));
  *acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(dw0, dx), *acc0);
  *acc0 = _mm256_fnmadd_ps(mw0, xs, *acc0);
  const __m256 dw1 = _mm256_mul_ps(ss.d1, U8ToF32(sm + 8 + 64));
  const __m256 mw1 = _mm256_mul_ps(ss.m1, U8ToF32(sm + 8 + 192));
  *acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(dw1, dx), *acc1);
  *acc1 = _mm256_fnmadd_ps(mw1, xs, *acc1);
}

// AVX-VNNI forms of Q8Step and Q4Step: int32 sums straight from the unsigned quants (Q8_0
// stored + 128), from the offset correction.
TARMAC_TARGET_AVX2_VNNI inline void Q8StepVnni(const uint8_t* p, __m256i x, __m256i* i0,
                                               __m256i* i1) {
  *i0 = _mm256_dpbusd_avx_epi32(*i0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)), x);
  *i1 = _mm256_dpbusd_avx_epi32(*i1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)),
                                x);
}

TARMAC_TARGET_AVX2_VNNI inline void Q4StepVnni(const uint8_t* p, __m256i xl, __m256i xh,
                                               __m256i* i0, __m256i* i1) {
  __m256i lo, hi;
  Nibbles(p, &lo, &hi);
  *i0 = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(*i0, lo, xl), hi, xh);
  Nibbles(p + 32, &lo, &hi);
  *i1 = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(*i1, lo, xl), hi, xh);
}

// The one-token passes, OneTokenAvx2 and OneTokenVnni (matvec_int8_one_token-inl.h).
#define TARMAC_ONE_TOKEN_NAME OneTokenAvx2
#define TARMAC_ONE_TOKEN_TARGET TARMAC_TARGET_AVX2
#define TARMAC_ONE_TOKEN_VNNI false
#include "kernels/matvec_int8_one_token-inl.h"
#undef TARMAC_ONE_TOKEN_NAME
#undef TARMAC_ONE_TOKEN_TARGET
#undef TARMAC_ONE_TOKEN_VNNI
#define TARMAC_ONE_TOKEN_NAME OneTokenVnni
#define TARMAC_ONE_TOKEN_TARGET TARMAC_TARGET_AVX2_VNNI
#define TARMAC_ONE_TOKEN_VNNI true
#include "kernels/matvec_int8_one_token-inl.h"
#undef TARMAC_ONE_TOKEN_NAME
#undef TARMAC_ONE_TOKEN_TARGET
#undef TARMAC_ONE_TOKEN_VNNI

// Tokens per pass: NT int32 sums and NT f32 accumulators plus the weight vectors fit the 16
// ymm registers up to 4.
constexpr int kMaxNT = 4;

// One token of group g of pk into y, and group g2 of pk2 into y2 beside it (NG 2).
template <bool kQ8, bool kMins, bool kVnni, int NG>
void OneToken(const QuantInterleaved& pk, int64_t g, const QuantInterleaved& pk2, int64_t g2,
              const int8_t* xq, const Acts& acts, float* y, float* y2, const StreamPrefetch& pf,
              bool prefetch) {
  if constexpr (kVnni) {
    OneTokenVnni<kQ8, kMins, NG>(pk, g, pk2, g2, xq, acts, y, y2, pf, prefetch);
  } else {
    OneTokenAvx2<kQ8, kMins, NG>(pk, g, pk2, g2, xq, acts, y, y2, pf, prefetch);
  }
}

template <bool kQ8, bool kMins, bool kVnni>
void Groups(const QuantInterleaved& pk, const StreamPrefetch& pf, int64_t n_tokens,
            const int8_t* xq, int64_t x_stride, const Acts& acts, float* y, int64_t y_stride,
            int64_t g0, int64_t g1) {
  const int64_t nb = pk.blocks();
  for (int64_t g = g0; g < g1; ++g) {
    if (n_tokens == 1 && g + 1 < g1) {  // two groups at once
      OneToken<kQ8, kMins, kVnni, 2>(pk, g, pk, g + 1, xq, acts, y, y, pf, true);
      ++g;
      continue;
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxNT) {
      const int nt = static_cast<int>(std::min<int64_t>(kMaxNT, n_tokens - t0));
      const int8_t* xt = xq + t0 * x_stride;
      const Acts at{acts.dx + t0 * nb, acts.corr + t0 * nb, acts.xs + t0 * nb};
      float* yt = y + t0 * y_stride;
      if (nt == 1) {  // both halves in one pass
        OneToken<kQ8, kMins, kVnni, 1>(pk, g, pk, g, xt, at, yt, yt, pf, t0 == 0);
        continue;
      }
      for (int h = 0; h < 2; ++h) {
        if (g * kRows + 8 * h >= pk.rows()) break;
        const bool first = t0 == 0 && h == 0;
#define TARMAC_MV8A_CALL(N)                                                               \
  case N:                                                                                 \
    if constexpr (kVnni) {                                                                \
      HalfBlockSumsVnni<kQ8, kMins, N, 1>(pk, g, h, xt, x_stride, at, yt, y_stride, pf, first); \
    } else {                                                                              \
      HalfBlockSumsAvx2<kQ8, kMins, N, 1>(pk, g, h, xt, x_stride, at, yt, y_stride, pf, first); \
    }                                                                                     \
    break;
        switch (nt) {
          TARMAC_MV8A_CALL(2)
          TARMAC_MV8A_CALL(3)
          TARMAC_MV8A_CALL(4)
          default: TARMAC_CHECK(false);
        }
#undef TARMAC_MV8A_CALL
      }
    }
  }
}

}  // namespace

// One token of groups [g0, g1) of pk and of the partner's matrix, group g of each as a pass's
// two streams.
template <bool kQ8, bool kMins, bool kVnni>
void PartnerGroups(const QuantInterleaved& pk, const StreamPrefetch& pf, const int8_t* xq,
                   const Acts& acts, float* y, const Partner& partner, int64_t g0, int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    OneToken<kQ8, kMins, kVnni, 2>(pk, g, *partner.pk, g, xq, acts, y, partner.y, pf, true);
  }
}

void InterleavedGroupsAvx2(const QuantInterleaved& pk, bool vnni, const StreamPrefetch& pf,
                           int64_t n_tokens, const int8_t* xq, int64_t x_stride, const float* dx,
                           const int32_t* corr, const float* xs, float* y, int64_t y_stride,
                           int64_t g0, int64_t g1, const Partner& partner) {
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= 16);
  TARMAC_CHECK(partner.pk == nullptr ||
               (partner.pk->type() == pk.type() && partner.pk->blocks() == pk.blocks() &&
                partner.pk->groups() == pk.groups() && partner.y != nullptr));
  const Acts a{dx, corr, xs};
  auto run = [&]<bool kQ8, bool kMins>() {
    auto groups = [&]<bool kVnni>() {
      if (partner.pk != nullptr && n_tokens == 1) {
        return PartnerGroups<kQ8, kMins, kVnni>(pk, pf, xq, a, y, partner, g0, g1);
      }
      Groups<kQ8, kMins, kVnni>(pk, pf, n_tokens, xq, x_stride, a, y, y_stride, g0, g1);
      if (partner.pk != nullptr) {
        Groups<kQ8, kMins, kVnni>(*partner.pk, pf, n_tokens, xq, x_stride, a, partner.y,
                                  y_stride, g0, g1);
      }
    };
    if (vnni) return groups.template operator()<true>();
    return groups.template operator()<false>();
  };
  switch (pk.type()) {
    case DType::kQ8_0: return run.template operator()<true, false>();
    case DType::kQ4_0: return run.template operator()<false, false>();
    default:
      TARMAC_DCHECK(pk.type() == DType::kQ4_K);
      return run.template operator()<false, true>();
  }
}
#else
void InterleavedGroupsAvx2(const QuantInterleaved&, bool, const StreamPrefetch&, int64_t,
                           const int8_t*, int64_t,
                           const float*, const int32_t*, const float*, float*, int64_t, int64_t,
                           int64_t, const Partner&) {
  TARMAC_CHECK(false && "x86 only");
}
#endif

}  // namespace tarmac::kernels::mv8_internal
