// AMX tiles of the prefill attention tile (see attention_amx.h).
//
// As in matmul_amx.cc, only functions marked TARMAC_AMX use AMX/AVX-512, they run only after
// AttentionAmxUsable() said yes, and they use intrinsics and raw pointers only.

#include "kernels/attention_amx.h"

#include "kernels/x86_intrinsics.h"  // <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "base/check.h"
#include "kernels/amx_split-inl.h"
#include "kernels/matmul_amx.h"

namespace tarmac::kernels {
namespace {

#define TARMAC_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

constexpr int32_t kChunk = 64;  // keys per chunk: 4 key tiles of 16, 2 steps of 32

// Tile numbers: C 0-3, A 4-5 (hi, lo), B 6-7 (hi, lo). _tile_* need constant tile numbers.
TARMAC_AMX inline void Dot3(int c) {
  // C += A_hi·B_hi + A_lo·B_hi + A_hi·B_lo
  switch (c) {
    case 0: _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(0, 5, 6); _tile_dpbf16ps(0, 4, 7); break;
    case 1: _tile_dpbf16ps(1, 4, 6); _tile_dpbf16ps(1, 5, 6); _tile_dpbf16ps(1, 4, 7); break;
    case 2: _tile_dpbf16ps(2, 4, 6); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(2, 4, 7); break;
    default: _tile_dpbf16ps(3, 4, 6); _tile_dpbf16ps(3, 5, 6); _tile_dpbf16ps(3, 4, 7); break;
  }
}

TARMAC_AMX inline void LoadC(int c, const float* p, int64_t stride_bytes) {
  switch (c) {
    case 0: _tile_loadd(0, p, stride_bytes); break;
    case 1: _tile_loadd(1, p, stride_bytes); break;
    case 2: _tile_loadd(2, p, stride_bytes); break;
    default: _tile_loadd(3, p, stride_bytes); break;
  }
}

TARMAC_AMX inline void StoreC(int c, float* p, int64_t stride_bytes) {
  switch (c) {
    case 0: _tile_stored(0, p, stride_bytes); break;
    case 1: _tile_stored(1, p, stride_bytes); break;
    case 2: _tile_stored(2, p, stride_bytes); break;
    default: _tile_stored(3, p, stride_bytes); break;
  }
}

TARMAC_AMX inline void ZeroC() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

// 16 f16 values a (dim/key x) and b (x + 1) -> 16 bf16 pairs (a_j low half, b_j high), hi and
// lo. An f16 has 11 significant bits: its f32 with the low 16 bits cleared is a bf16 (top 8
// bits), and the rest, v - hi, has at most 3 bits, so its f32 also ends in 16 zero bits.
TARMAC_AMX inline void PairF16(__m256i a, __m256i b, uint16_t* hi, uint16_t* lo) {
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m512 fa = _mm512_cvtph_ps(a), fb = _mm512_cvtph_ps(b);
  const __m512i ha = _mm512_and_si512(_mm512_castps_si512(fa), top);
  const __m512i hb = _mm512_and_si512(_mm512_castps_si512(fb), top);
  const __m512i la = _mm512_castps_si512(_mm512_sub_ps(fa, _mm512_castsi512_ps(ha)));
  const __m512i lb = _mm512_castps_si512(_mm512_sub_ps(fb, _mm512_castsi512_ps(hb)));
  _mm512_store_si512(hi, _mm512_or_si512(hb, _mm512_srli_epi32(ha, 16)));
  _mm512_store_si512(lo, _mm512_or_si512(_mm512_and_si512(lb, top), _mm512_srli_epi32(la, 16)));
}

TARMAC_AMX void StageKvImpl(const PagedKvView& kv, int32_t head, const int32_t* blocks,
                            int32_t n_blocks, int32_t valid_keys, uint16_t* k_hi,
                            uint16_t* k_lo, uint16_t* v_hi, uint16_t* v_lo) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  const int32_t steps = hd / 32, dtiles = hd / 16;
  TARMAC_DCHECK(valid_keys <= n_blocks * bs && n_blocks * bs <= kChunk);
  // K: tile kt holds keys [16kt, 16kt + 16); row kk of step s pairs dims s·32 + 2kk and +1.
  for (int32_t kt = 0; kt < 4; ++kt) {
    const int32_t k0 = kt * 16;
    const int32_t live = std::clamp(valid_keys - k0, 0, 16);
    uint16_t* th = k_hi + kt * steps * 512;
    uint16_t* tl = k_lo + kt * steps * 512;
    if (live == 0) {
      std::memset(th, 0, steps * 1024);
      std::memset(tl, 0, steps * 1024);
      continue;
    }
    const __mmask16 m = live == 16 ? 0xFFFF : static_cast<__mmask16>((1u << live) - 1);
    const uint16_t* base = kv.KRows(blocks[k0 / bs], head) + k0 % bs;  // [hd][bs]
    for (int32_t d = 0; d < hd; d += 2) {
      const __m256i a = _mm256_maskz_loadu_epi16(m, base + static_cast<int64_t>(d) * bs);
      const __m256i b = _mm256_maskz_loadu_epi16(m, base + static_cast<int64_t>(d + 1) * bs);
      const int64_t row = (d / 32) * 512 + (d % 32) / 2 * 32;
      PairF16(a, b, th + row, tl + row);
    }
  }
  // V: step s2 holds keys [32·s2, 32·s2 + 32); row kk of dim tile dt pairs keys 2kk and 2kk+1.
  const __m256i zero = _mm256_setzero_si256();
  for (int32_t s2 = 0; s2 < 2; ++s2) {
    for (int32_t kk = 0; kk < 16; ++kk) {
      const int32_t ka = s2 * 32 + 2 * kk, kb = ka + 1;
      const uint16_t* ra = ka < valid_keys ? kv.VRows(blocks[ka / bs], head) +
                                                 static_cast<int64_t>(ka % bs) * hd
                                           : nullptr;
      const uint16_t* rb = kb < valid_keys ? kv.VRows(blocks[kb / bs], head) +
                                                 static_cast<int64_t>(kb % bs) * hd
                                           : nullptr;
      for (int32_t dt = 0; dt < dtiles; ++dt) {
        const __m256i a = ra != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra + dt * 16)) : zero;
        const __m256i b = rb != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + dt * 16)) : zero;
        const int64_t row = (static_cast<int64_t>(s2) * dtiles + dt) * 512 + kk * 32;
        PairF16(a, b, v_hi + row, v_lo + row);
      }
    }
  }
}

TARMAC_AMX void ScoresImpl(const uint16_t* q_hi, const uint16_t* q_lo, int64_t r_tiles,
                           int32_t hd, const uint16_t* k_hi, const uint16_t* k_lo, float* s) {
  const int32_t steps = hd / 32;
  for (int64_t rt = 0; rt < r_tiles; ++rt) {
    ZeroC();
    for (int32_t st = 0; st < steps; ++st) {
      _tile_loadd(4, q_hi + rt * 16 * hd + st * 32, hd * 2);
      _tile_loadd(5, q_lo + rt * 16 * hd + st * 32, hd * 2);
      for (int kt = 0; kt < 4; ++kt) {
        _tile_loadd(6, k_hi + (kt * steps + st) * 512, 64);
        _tile_loadd(7, k_lo + (kt * steps + st) * 512, 64);
        Dot3(kt);
      }
    }
    for (int kt = 0; kt < 4; ++kt) StoreC(kt, s + rt * 16 * kChunk + kt * 16, kChunk * 4);
  }
}

TARMAC_AMX void AccumulateImpl(const uint16_t* p_hi, const uint16_t* p_lo, int64_t r_tiles,
                               int32_t hd, const uint16_t* v_hi, const uint16_t* v_lo,
                               float* o) {
  const int32_t dtiles = hd / 16;
  for (int64_t rt = 0; rt < r_tiles; ++rt) {
    float* orow = o + rt * 16 * hd;
    for (int32_t dg = 0; dg < dtiles; dg += 4) {
      const int nd = std::min(4, dtiles - dg);
      for (int j = 0; j < nd; ++j) LoadC(j, orow + (dg + j) * 16, hd * 4);
      for (int32_t s2 = 0; s2 < 2; ++s2) {
        _tile_loadd(4, p_hi + rt * 16 * kChunk + s2 * 32, kChunk * 2);
        _tile_loadd(5, p_lo + rt * 16 * kChunk + s2 * 32, kChunk * 2);
        for (int j = 0; j < nd; ++j) {
          _tile_loadd(6, v_hi + (s2 * dtiles + dg + j) * 512, 64);
          _tile_loadd(7, v_lo + (s2 * dtiles + dg + j) * 512, 64);
          Dot3(j);
        }
      }
      for (int j = 0; j < nd; ++j) StoreC(j, orow + (dg + j) * 16, hd * 4);
    }
  }
}

// exp(x) for x <= 0 (-inf gives 0): 2^n · p(r) with r = x - n·ln2 in [-ln2/2, ln2/2] (ln2 in
// two parts, so r is exact) and p the degree-7 Taylor polynomial (truncation < 6e-9 relative,
// a tenth of an f32 ulp). Below -87, where exp leaves f32's normal range, the result is 0:
// a subnormal result would cost a microcode assist per instruction that touches it (the
// masked keys of every causal chunk produce them; bench/NOTES.md), and next to the row's
// largest term (1) it is 1e-38 of nothing.
TARMAC_AMX inline __m512 ExpNonPositive(__m512 x) {
  const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606820309417e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(normal, p, n);
}

template <bool kMax>
TARMAC_AMX inline __m512 MaxOrAdd(__m512 a, __m512 b) {
  return kMax ? _mm512_max_ps(a, b) : _mm512_add_ps(a, b);
}

// Lane i of the result = v[i]'s 16 lanes reduced (max or sum): 15 shuffle pairs for 16 rows
// instead of a 4-level shuffle chain per row.
template <bool kMax>
TARMAC_AMX inline __m512 Reduce16(const __m512* v) {
  __m512 u[8], w[4], x[2];
  for (int i = 0; i < 8; ++i) {  // u[i]: rows 2i, 2i+1 (8 lanes each)
    u[i] = MaxOrAdd<kMax>(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                          _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  }
  for (int i = 0; i < 4; ++i) {  // w[i]: 128-bit quarter q holds row 4i + q
    w[i] = MaxOrAdd<kMax>(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0x88),
                          _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0xDD));
  }
  for (int i = 0; i < 2; ++i) {  // x[i], quarter q: lanes 0-1 row 8i + q, lanes 2-3 row 8i + q + 4
    x[i] = MaxOrAdd<kMax>(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0x44),
                          _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], 0xEE));
  }
  // Lane 4q + j holds row q + 4j.
  const __m512 y = MaxOrAdd<kMax>(_mm512_shuffle_ps(x[0], x[1], 0x88),
                                  _mm512_shuffle_ps(x[0], x[1], 0xDD));
  const __m512i idx = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(idx, y);
}

// cap · tanh(x / cap), as tanh(|y|) = (1 - e) / (1 + e) with e = exp(-2|y|) <= 1 and the
// sign of y restored: ExpNonPositive covers the whole range, and the absolute error stays
// at f32 rounding of cap (what a score can be off by anyway).
TARMAC_AMX inline __m512 SoftCap16(__m512 x, __m512 cap, __m512 inv_cap) {
  const __m512 y = _mm512_mul_ps(x, inv_cap);
  const __m512 sign = _mm512_and_ps(y, _mm512_set1_ps(-0.0f));
  const __m512 a = _mm512_andnot_ps(_mm512_set1_ps(-0.0f), y);
  const __m512 e = ExpNonPositive(_mm512_mul_ps(a, _mm512_set1_ps(-2.0f)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  return _mm512_mul_ps(_mm512_or_ps(t, sign), cap);
}

// Lanes [lo, hi) of a 16-lane piece (clamped to it).
inline __mmask16 LaneRange(int64_t lo, int64_t hi) {
  lo = std::clamp<int64_t>(lo, 0, 16);
  hi = std::clamp<int64_t>(hi, 0, 16);
  if (hi <= lo) return 0;
  const uint32_t below_hi = hi == 16 ? 0xFFFFu : (1u << hi) - 1;
  return static_cast<__mmask16>(below_hi & ~((1u << lo) - 1));
}

TARMAC_AMX void SoftmaxChunkImpl(float* s, int64_t rp, int64_t n_rows, int32_t group,
                                 int64_t pos0, int64_t key0, float scale, int32_t hd, float* m,
                                 float* l, float* o, uint16_t* p_hi, uint16_t* p_lo,
                                 const AttentionVariant& variant) {
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  const bool capped = variant.softcap > 0.0f;
  const __m512 cap = _mm512_set1_ps(variant.softcap);
  const __m512 inv_cap = _mm512_set1_ps(capped ? 1.0f / variant.softcap : 0.0f);
  __m512 acc[16];
  for (int64_t g = 0; g < rp; g += 16) {
    for (int i = 0; i < 16; ++i) {  // scale, mask the keys row r may not see, row maxima
      const int64_t r = g + i;
      // Row r sees the chunk's columns [first, live).
      const int64_t pos = pos0 + r / group;
      const int64_t live = r < n_rows ? std::clamp<int64_t>(pos + 1 - key0, 0, kChunk) : 0;
      const int64_t first = std::clamp<int64_t>(variant.FirstKey(pos) - key0, 0, kChunk);
      float* row = s + r * kChunk;
      __m512 mx = neg_inf;
      for (int j = 0; j < 4; ++j) {
        const __mmask16 k = LaneRange(first - 16 * j, live - 16 * j);
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(row + 16 * j), vscale);
        if (capped) v = SoftCap16(v, cap, inv_cap);
        v = _mm512_mask_mov_ps(neg_inf, k, v);
        _mm512_storeu_ps(row + 16 * j, v);
        mx = _mm512_max_ps(mx, v);
      }
      acc[i] = mx;
    }
    const __m512 m_old = _mm512_loadu_ps(m + g);
    // A row that has seen no key yet (padding rows) keeps a finite max, so that s - max
    // below is -inf (p = 0) rather than NaN.
    const __m512 m_new = _mm512_max_ps(_mm512_max_ps(m_old, Reduce16<true>(acc)),
                                       _mm512_set1_ps(-FLT_MAX));
    const __m512 c = ExpNonPositive(_mm512_sub_ps(m_old, m_new));  // 0 on a row's first keys
    _mm512_storeu_ps(m + g, m_new);
    for (int i = 0; i < 16; ++i) {  // p = exp(s - max), split for the P·V tiles; row sums
      const int64_t r = g + i;
      const __m512 mb = _mm512_permutexvar_ps(_mm512_set1_epi32(i), m_new);
      const float* row = s + r * kChunk;
      __m512 sum = _mm512_setzero_ps();
      for (int j = 0; j < kChunk; j += 32) {
        const __m512 a = ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(row + j), mb));
        const __m512 b = ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(row + j + 16), mb));
        sum = _mm512_add_ps(sum, _mm512_add_ps(a, b));
        SplitBf16x32(a, b, p_hi + r * kChunk + j, p_lo + r * kChunk + j);
      }
      acc[i] = sum;
    }
    _mm512_storeu_ps(l + g, _mm512_fmadd_ps(_mm512_loadu_ps(l + g), c, Reduce16<false>(acc)));
    // Rows whose running max rose: their output so far is rescaled by c.
    __mmask16 rescale = _mm512_cmp_ps_mask(c, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ);
    while (rescale != 0) {
      const int i = __builtin_ctz(rescale);
      rescale = static_cast<__mmask16>(rescale & (rescale - 1));
      const __m512 cb = _mm512_permutexvar_ps(_mm512_set1_epi32(i), c);
      float* orow = o + (g + i) * hd;
      for (int32_t d = 0; d < hd; d += 16)
        _mm512_storeu_ps(orow + d, _mm512_mul_ps(_mm512_loadu_ps(orow + d), cb));
    }
  }
}

}  // namespace

bool AttentionAmxUsable(int32_t nq, int32_t group, const PagedKvView& kv) {
  const int32_t bs = kv.block_size;
  return nq >= 2 && static_cast<int64_t>(nq) * group >= 16 && !kv.is_int8() &&
         kv.head_dim % 32 == 0 && kv.head_dim <= 256 && (bs == 16 || bs == 32 || bs == 64) &&
         AmxEnabled();
}

void AmxStageKv(const PagedKvView& kv, int32_t head, const int32_t* blocks, int32_t n_blocks,
                int32_t valid_keys, uint16_t* k_hi, uint16_t* k_lo, uint16_t* v_hi,
                uint16_t* v_lo) {
  StageKvImpl(kv, head, blocks, n_blocks, valid_keys, k_hi, k_lo, v_hi, v_lo);
}

void AmxScores(const uint16_t* q_hi, const uint16_t* q_lo, int64_t r_tiles, int32_t head_dim,
               const uint16_t* k_hi, const uint16_t* k_lo, float* s) {
  ScoresImpl(q_hi, q_lo, r_tiles, head_dim, k_hi, k_lo, s);
}

void AmxSoftmaxChunk(float* s, int64_t rp, int64_t n_rows, int32_t group, int64_t pos0,
                     int64_t key0, float scale, int32_t head_dim, float* m, float* l, float* o,
                     uint16_t* p_hi, uint16_t* p_lo, const AttentionVariant& variant) {
  TARMAC_DCHECK(rp % 16 == 0 && n_rows <= rp && head_dim % 16 == 0);
  TARMAC_DCHECK(variant.window >= 0 && variant.softcap >= 0.0f);
  SoftmaxChunkImpl(s, rp, n_rows, group, pos0, key0, scale, head_dim, m, l, o, p_hi, p_lo,
                   variant);
}

void AmxAccumulate(const uint16_t* p_hi, const uint16_t* p_lo, int64_t r_tiles,
                   int32_t head_dim, const uint16_t* v_hi, const uint16_t* v_lo, float* o) {
  AccumulateImpl(p_hi, p_lo, r_tiles, head_dim, v_hi, v_lo, o);
}

}  // namespace tarmac::kernels
