#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/attention_amx.h"
#include "kernels/matmul_amx.h"
#include "kernels/ops.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"

#ifndef HWY_DISABLED_TARGETS  // see dequant.cc
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/half_scalar-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// Per-thread scratch, grown on first use and then reused (no allocation per step).
struct Scratch {
  std::vector<float> kt;     // [block][head_dim][bs_pad]: K of one chunk (stored transposed)
  std::vector<float> vt;     // [chunk keys][head_dim]
  std::vector<float> tmp;    // [head_dim][block_size]: K before padding to bs_pad
  std::vector<float> p;      // [group][chunk columns]: scores, then probabilities
  std::vector<float> m, l;   // [nq * group]: running max and denominator
  std::vector<float> acc;    // [nq * group][head_dim]: running numerator
};

// dst[i] = src[i] * scale, int8 -> f32.
void ConvertI8Scaled(const int8_t* HWY_RESTRICT src, float scale, float* HWY_RESTRICT dst,
                     int64_t n) {
  const DF df;
  const hn::Rebind<int8_t, DF> d8;
  const hn::Rebind<int32_t, DF> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vs = hn::Set(df, scale);
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, src + i))), vs), df,
               dst + i);
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]) * scale;
}

// Decode (one query token) with f16 K/V, head_dim = H vectors (4, or 8 on targets with 16
// registers: AVX2's head dim 64), G <= 4 query heads per KV head: K and V are widened in
// registers straight from the cache instead of being copied to f32 scratch per block, and
// the G heads share every K/V load with independent FMA chains. The running sums stay in
// registers where they fit (H = 4); with H = 8 each row of V is taken in two passes of 4
// vectors, so a pass's sums are in registers while the other's wait in L1. The general path
// below computes the same sums (it orders them differently: one FMA chain per score, a
// softmax update per chunk of blocks), so the two agree to f32 rounding.
template <int G, int H>
void DecodeTileF16(const float* HWY_RESTRICT q, int64_t pos, int32_t kv_head,
                   const PagedKvView& kv, const int32_t* block_table, float scale,
                   const AttentionVariant& variant, float* HWY_RESTRICT out) {
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t hd = kv.head_dim, bs = kv.block_size;
  using VF = decltype(hn::Zero(df));
  VF acc[G][H];
  float m[G], l[G];
  for (int u = 0; u < G; ++u) {
    for (int i = 0; i < H; ++i) acc[u][i] = hn::Zero(df);
    m[u] = -std::numeric_limits<float>::infinity();
    l[u] = 0.0f;
  }
  static thread_local std::vector<float> p_store;
  if (static_cast<int64_t>(p_store.size()) < G * bs) p_store.resize(G * bs);
  float* HWY_RESTRICT p = p_store.data();  // [G][bs]
  const auto vscale = hn::Set(df, scale);
  const auto neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const bool capped = variant.softcap > 0.0f;
  const auto vcap = hn::Set(df, variant.softcap);
  const auto vinv_cap = hn::Set(df, capped ? 1.0f / variant.softcap : 0.0f);
  const int64_t first_key = variant.FirstKey(pos);
  const int64_t n_blocks = pos / bs + 1;
  // The window's first block holds first_key, a key this token sees: every block processed
  // has a live key, so the running max is finite from the first one on.
  for (int64_t b = first_key / bs; b < n_blocks; ++b) {
    const int32_t block = block_table[b];
    const int64_t rows = std::min<int64_t>(bs, pos + 1 - b * bs);
    const auto* K = reinterpret_cast<const hwy::float16_t*>(kv.KRows(block, kv_head));
    const auto* V = reinterpret_cast<const hwy::float16_t*>(kv.VRows(block, kv_head));
    // Scattered blocks: fetch the next one into L2 meanwhile, a line per step of the score
    // loop (a burst of hints fills the miss buffers and stalls this block's loads).
    const char* pf_k = nullptr;
    const char* pf_v = nullptr;
    if (b + 1 < n_blocks) {
      pf_k = reinterpret_cast<const char*>(kv.KRows(block_table[b + 1], kv_head));
      pf_v = reinterpret_cast<const char*>(kv.VRows(block_table[b + 1], kv_head));
    }
    const int64_t pf_bytes = pf_k != nullptr ? bs * hd * 2 : 0;  // of K, and of V
    int64_t pf_at = 0;  // bytes of K, then of V, hinted so far
    VF vmax[G];
    for (int u = 0; u < G; ++u) vmax[u] = neg_inf;
    for (int64_t j0 = 0; j0 < rows; j0 += N) {
      VF a[G][2];
      for (int u = 0; u < G; ++u) a[u][0] = a[u][1] = hn::Zero(df);
      for (int64_t d = 0; d < hd; d += 2) {  // K is [head_dim][block_size]
        if (pf_at < 2 * pf_bytes) {
          __builtin_prefetch(pf_at < pf_bytes ? pf_k + pf_at : pf_v + (pf_at - pf_bytes), 0, 2);
          pf_at += 64;
        }
        const auto k0 = hn::PromoteTo(df, hn::LoadU(dh, K + d * bs + j0));
        const auto k1 = hn::PromoteTo(df, hn::LoadU(dh, K + (d + 1) * bs + j0));
        for (int u = 0; u < G; ++u) {
          a[u][0] = hn::MulAdd(hn::Set(df, q[u * hd + d]), k0, a[u][0]);
          a[u][1] = hn::MulAdd(hn::Set(df, q[u * hd + d + 1]), k1, a[u][1]);
        }
      }
      auto live = hn::FirstN(df, static_cast<size_t>(rows - j0));
      const int64_t before = first_key - (b * bs + j0);  // leading lanes outside the window
      if (before > 0) live = hn::AndNot(hn::FirstN(df, static_cast<size_t>(before)), live);
      for (int u = 0; u < G; ++u) {
        auto raw = hn::Mul(hn::Add(a[u][0], a[u][1]), vscale);
        if (capped) raw = hn::Mul(hn::Tanh(df, hn::Mul(raw, vinv_cap)), vcap);
        const auto sc = hn::IfThenElse(live, raw, neg_inf);
        hn::StoreU(sc, df, p + u * bs + j0);
        vmax[u] = hn::Max(vmax[u], sc);
      }
    }
    for (; pf_at < 2 * pf_bytes; pf_at += 64) {  // lines the score loop had no step for
      __builtin_prefetch(pf_at < pf_bytes ? pf_k + pf_at : pf_v + (pf_at - pf_bytes), 0, 2);
    }
    for (int u = 0; u < G; ++u) {
      float* HWY_RESTRICT pu = p + u * bs;
      const float m_new = std::max(m[u], hn::GetLane(hn::MaxOfLanes(df, vmax[u])));
      const auto vm = hn::Set(df, m_new);
      auto vsum = hn::Zero(df);
      for (int64_t j0 = 0; j0 < rows; j0 += N) {
        const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, pu + j0), vm));
        hn::StoreU(e, df, pu + j0);
        vsum = hn::Add(vsum, e);
      }
      const float corr = std::exp(m[u] - m_new);
      if (corr != 1.0f) {
        const auto vc = hn::Set(df, corr);
        for (int i = 0; i < H; ++i) acc[u][i] = hn::Mul(acc[u][i], vc);
      }
      l[u] = l[u] * corr + hn::GetLane(hn::SumOfLanes(df, vsum));
      m[u] = m_new;
    }
    for (int pass = 0; pass < H / 4; ++pass) {
      VF* a = nullptr;
      for (int64_t j = 0; j < rows; ++j) {  // V is [block_size][head_dim]
        const auto* vj = V + j * hd + pass * 4 * N;
        const auto v0 = hn::PromoteTo(df, hn::LoadU(dh, vj));
        const auto v1 = hn::PromoteTo(df, hn::LoadU(dh, vj + N));
        const auto v2 = hn::PromoteTo(df, hn::LoadU(dh, vj + 2 * N));
        const auto v3 = hn::PromoteTo(df, hn::LoadU(dh, vj + 3 * N));
        for (int u = 0; u < G; ++u) {
          a = acc[u] + pass * 4;
          const auto pj = hn::Set(df, p[u * bs + j]);
          a[0] = hn::MulAdd(pj, v0, a[0]);
          a[1] = hn::MulAdd(pj, v1, a[1]);
          a[2] = hn::MulAdd(pj, v2, a[2]);
          a[3] = hn::MulAdd(pj, v3, a[3]);
        }
      }
    }
  }
  for (int u = 0; u < G; ++u) {
    const auto inv = hn::Set(df, 1.0f / l[u]);
    for (int i = 0; i < H; ++i) hn::StoreU(hn::Mul(acc[u][i], inv), df, out + u * hd + i * N);
  }
}

// One online-softmax update of a row over a chunk: p[0, n) (n a multiple of the vector length)
// holds scaled scores (-inf where masked) whose max is chunk_max; they become exp(score - m)
// for the new running max m, and the running max *m and denominator *l are updated. Returns
// the correction exp(m_old - m) the row's running sums must be scaled by (0 on the first
// chunk, m_old = -inf).
float SoftmaxChunk(float* HWY_RESTRICT p, int64_t n, float chunk_max, float* m, float* l) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const float m_old = *m;
  const float m_new = std::max(m_old, chunk_max);
  const auto vm = hn::Set(df, m_new);
  auto vsum = hn::Zero(df);
  for (int64_t j = 0; j < n; j += N) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, p + j), vm));  // -inf -> 0
    hn::StoreU(e, df, p + j);
    vsum = hn::Add(vsum, e);
  }
  const float c = std::exp(m_old - m_new);
  *l = *l * c + hn::GetLane(hn::SumOfLanes(df, vsum));
  *m = m_new;
  return c;
}

// Registers per target: AVX-512 has 32 vector registers, AVX2 16, so the register blocks of
// the general path below are smaller there (spilled accumulators cost more than the loads
// they save).
#if HWY_TARGET <= HWY_AVX3
constexpr int kPvHeads = 4;  // heads whose P·V sums share each V load: 4 × 4 accumulators
#else
constexpr int kPvHeads = 2;  // 2 × 4 accumulators + 4 V vectors of 16 registers
#endif

// acc[u][d0, d0 + 4N) = corr[u] · acc[u][d0, d0 + 4N) + sum_{j < rows} p[u][j] · v[j][d0, d0 + 4N)
// for U heads: the running sums stay in registers across the rows, each V load is shared by
// the U heads. p rows at stride p_stride, acc rows and v rows at stride hd.
template <int U>
HWY_INLINE void AccumulatePv(const float* HWY_RESTRICT p, int64_t p_stride,
                             const float* HWY_RESTRICT vt, int64_t hd, int64_t d0, int64_t rows,
                             const float* corr, float* HWY_RESTRICT acc) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  using VF = decltype(hn::Zero(df));
  VF a[U][4];
  for (int u = 0; u < U; ++u) {
    const auto vc = hn::Set(df, corr[u]);
    for (int k = 0; k < 4; ++k) a[u][k] = hn::Mul(hn::LoadU(df, acc + u * hd + d0 + k * N), vc);
  }
  for (int64_t j = 0; j < rows; ++j) {
    const float* HWY_RESTRICT vj = vt + j * hd + d0;
    const auto v0 = hn::LoadU(df, vj), v1 = hn::LoadU(df, vj + N);
    const auto v2 = hn::LoadU(df, vj + 2 * N), v3 = hn::LoadU(df, vj + 3 * N);
    for (int u = 0; u < U; ++u) {
      const auto pj = hn::Set(df, p[u * p_stride + j]);
      a[u][0] = hn::MulAdd(pj, v0, a[u][0]);
      a[u][1] = hn::MulAdd(pj, v1, a[u][1]);
      a[u][2] = hn::MulAdd(pj, v2, a[u][2]);
      a[u][3] = hn::MulAdd(pj, v3, a[u][3]);
    }
  }
  for (int u = 0; u < U; ++u)
    for (int k = 0; k < 4; ++k) hn::StoreU(a[u][k], df, acc + u * hd + d0 + k * N);
}

// The tile on AMX (attention_amx.h): per chunk of 64 keys, S = Q·Kᵀ on tiles, the online
// softmax (one update per row per chunk, as in the general path, 16 rows at a time in
// AmxSoftmaxChunk), O += P·V on tiles.
// Query row r is token r / group, head h0 + r % group.
void AttentionTileAmx(const float* q, int64_t q_stride, int32_t nq, int64_t pos0, int32_t group,
                      int32_t h0, int32_t kv_head, const PagedKvView& kv,
                      const int32_t* block_table, float scale, const AttentionVariant& variant,
                      float* out, int64_t out_stride) {
  constexpr int64_t kC = 64;  // keys per chunk
  const int64_t hd = kv.head_dim, bs = kv.block_size;
  const int64_t R = static_cast<int64_t>(nq) * group, Rp = (R + 15) / 16 * 16;
  // Per-thread scratch: [qf | o] f32, [qh | ql | ph | pl | k hi/lo | v hi/lo] bf16, s f32.
  struct AmxScratch {
    AlignedBuffer buf;
    std::vector<float> m, l;
  };
  static thread_local AmxScratch sc;
  const int64_t q_elems = Rp * hd, s_elems = Rp * kC, kv_elems = kC * hd;
  const size_t need = static_cast<size_t>(4 * (2 * q_elems + s_elems) +
                                          2 * (2 * q_elems + 2 * s_elems + 4 * kv_elems));
  if (sc.buf.size() < need) sc.buf.Resize(need);
  if (static_cast<int64_t>(sc.m.size()) < Rp) {
    sc.m.resize(Rp);
    sc.l.resize(Rp);
  }
  float* qf = sc.buf.as<float>();
  float* o = qf + q_elems;
  float* s = o + q_elems;
  uint16_t* qh = reinterpret_cast<uint16_t*>(s + s_elems);
  uint16_t* ql = qh + q_elems;
  uint16_t* ph = ql + q_elems;
  uint16_t* pl = ph + s_elems;
  uint16_t* kh = pl + s_elems;
  uint16_t* kl = kh + kv_elems;
  uint16_t* vh = kl + kv_elems;
  uint16_t* vl = vh + kv_elems;
  for (int64_t r = 0; r < R; ++r) {
    std::memcpy(qf + r * hd, q + (r / group) * q_stride + (h0 + r % group) * hd, hd * 4);
  }
  std::fill(qf + R * hd, qf + Rp * hd, 0.0f);
  std::fill(o, o + Rp * hd, 0.0f);
  std::fill(sc.m.begin(), sc.m.begin() + Rp, -std::numeric_limits<float>::infinity());
  std::fill(sc.l.begin(), sc.l.begin() + Rp, 0.0f);
  AmxSplitRows(qf, Rp * hd, qh, ql);

  const int64_t last_pos = pos0 + nq - 1;
  const int64_t n_blocks = last_pos / bs + 1;
  const int64_t bpc = kC / bs;
  AmxConfigureTiles();  // once for every chunk's tile products
  // Chunks start at the block of the tile's first visible key: blocks before it are never
  // read (they may have been freed).
  for (int64_t c0 = variant.FirstKey(pos0) / bs; c0 < n_blocks; c0 += bpc) {
    const int64_t nbk = std::min(bpc, n_blocks - c0);
    const int64_t key0 = c0 * bs;
    const int32_t valid_keys = static_cast<int32_t>(std::min(nbk * bs, last_pos + 1 - key0));
    AmxStageKv(kv, kv_head, block_table + c0, static_cast<int32_t>(nbk), valid_keys, kh, kl, vh,
               vl);
    AmxScores(qh, ql, Rp / 16, static_cast<int32_t>(hd), kh, kl, s);
    AmxSoftmaxChunk(s, Rp, R, group, pos0, key0, scale, static_cast<int32_t>(hd), sc.m.data(),
                    sc.l.data(), o, ph, pl, variant);
    AmxAccumulate(ph, pl, Rp / 16, static_cast<int32_t>(hd), vh, vl, o);
  }
  AmxReleaseTiles();
  for (int64_t r = 0; r < R; ++r) {
    Scale(o + r * hd, 1.0f / sc.l[r], out + (r / group) * out_stride + (h0 + r % group) * hd, hd);
  }
}

}  // namespace

void AttentionTile(const float* q, int64_t q_stride, int32_t nq, int64_t pos0, int32_t n_heads,
                   int32_t kv_head, const PagedKvView& kv, const int32_t* block_table,
                   float scale, float* out, int64_t out_stride, const AttentionVariant& variant,
                   const TreeMask* tree) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t hd = kv.head_dim, bs = kv.block_size;
  const int32_t group = n_heads / kv.n_kv_heads;
  const int32_t h0 = kv_head * group;
  const int64_t bs_pad = (bs + N - 1) / N * N;
  const int64_t n_states = static_cast<int64_t>(nq) * group;
  // Tree tiles (a few verification tokens) take the general path, which applies the mask.
#if HWY_TARGET <= HWY_AVX3
  constexpr bool kEightVectorHeads = false;  // head dim 128 keeps the general path here
#else
  constexpr bool kEightVectorHeads = true;
#endif
  if (tree == nullptr && nq == 1 && !kv.is_int8() && TARMAC_HWY_HARDWARE_F16 &&
      (hd == 4 * N || (kEightVectorHeads && hd == 8 * N)) && bs % N == 0 && group <= 4) {
    const float* qh = q + static_cast<int64_t>(h0) * hd;
    float* oh = out + static_cast<int64_t>(h0) * hd;
    if (hd == 8 * N) {
      switch (group) {
        case 1: return DecodeTileF16<1, 8>(qh, pos0, kv_head, kv, block_table, scale, variant, oh);
        case 2: return DecodeTileF16<2, 8>(qh, pos0, kv_head, kv, block_table, scale, variant, oh);
        case 3: return DecodeTileF16<3, 8>(qh, pos0, kv_head, kv, block_table, scale, variant, oh);
        default: return DecodeTileF16<4, 8>(qh, pos0, kv_head, kv, block_table, scale, variant, oh);
      }
    }
    switch (group) {
      case 1: return DecodeTileF16<1, 4>(qh, pos0, kv_head, kv, block_table, scale, variant, oh);
      case 2: return DecodeTileF16<2, 4>(qh, pos0, kv_head, kv, block_table, scale, variant, oh);
      case 3: return DecodeTileF16<3, 4>(qh, pos0, kv_head, kv, block_table, scale, variant, oh);
      default: return DecodeTileF16<4, 4>(qh, pos0, kv_head, kv, block_table, scale, variant, oh);
    }
  }
  if (tree == nullptr && AttentionAmxUsable(nq, group, kv)) {
    return AttentionTileAmx(q, q_stride, nq, pos0, group, h0, kv_head, kv, block_table, scale,
                            variant, out, out_stride);
  }
  // Keys are taken in chunks of whole blocks, up to kChunkKeys keys (blocks whose size is not
  // a multiple of the vector length: one block, padded): each query's online-softmax update
  // (max, exp of the correction, rescaling the running sums) happens once per chunk, and the
  // scores of a chunk are register-blocked over up to 4 key vectors and 4 heads.
  constexpr int64_t kChunkKeys = 64;
  const int64_t bpc = bs == bs_pad ? std::max<int64_t>(1, kChunkKeys / bs) : 1;  // blocks
  const int64_t cw_pad = bpc * bs_pad;  // score columns per head
  static thread_local Scratch s;
  if (static_cast<int64_t>(s.kt.size()) < hd * cw_pad) s.kt.resize(hd * cw_pad);
  if (static_cast<int64_t>(s.vt.size()) < bpc * bs * hd) s.vt.resize(bpc * bs * hd);
  if (static_cast<int64_t>(s.tmp.size()) < bs * hd) s.tmp.resize(bs * hd);
  if (static_cast<int64_t>(s.p.size()) < group * cw_pad) s.p.resize(group * cw_pad);
  if (static_cast<int64_t>(s.m.size()) < n_states) {
    s.m.resize(n_states);
    s.l.resize(n_states);
  }
  // + N: the masked tail loads of the last row stay inside the buffer.
  if (static_cast<int64_t>(s.acc.size()) < n_states * hd + N) s.acc.resize(n_states * hd + N);
  std::fill(s.m.begin(), s.m.begin() + n_states, -std::numeric_limits<float>::infinity());
  std::fill(s.l.begin(), s.l.begin() + n_states, 0.0f);
  std::fill(s.acc.begin(), s.acc.begin() + n_states * hd, 0.0f);
  float* HWY_RESTRICT kt = s.kt.data();  // [block in chunk][head_dim][bs_pad]
  float* HWY_RESTRICT vt = s.vt.data();  // [key in chunk][head_dim]
  float* HWY_RESTRICT p_all = s.p.data();  // [group][cw_pad]
  const auto vscale = hn::Set(df, scale);
  const auto neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const bool capped = variant.softcap > 0.0f;
  const auto vcap = hn::Set(df, variant.softcap);
  const auto vinv_cap = hn::Set(df, capped ? 1.0f / variant.softcap : 0.0f);
  using VF = decltype(hn::Zero(df));

  const int64_t last_pos = pos0 + nq - 1;
  const int64_t n_blocks = last_pos / bs + 1;
  // Chunks start at the block of the tile's first visible key: blocks before it are never
  // read (they may have been freed).
  for (int64_t c0 = variant.FirstKey(pos0) / bs; c0 < n_blocks; c0 += bpc) {
    const int64_t nbk = std::min(bpc, n_blocks - c0);
    const int64_t key0 = c0 * bs;
    for (int64_t bi = 0; bi < nbk; ++bi) {
      const int32_t block = block_table[c0 + bi];
      const int64_t rows_b = std::min<int64_t>(bs, last_pos + 1 - (c0 + bi) * bs);
      if (bi + 1 == nbk && c0 + nbk < n_blocks) {
        // Blocks are scattered, so the hardware prefetcher cannot run ahead: ask for the next
        // chunk's K/V (into L2: an L1 hint would evict this chunk's f32 scratch) while this
        // one is computed.
        const int64_t bytes = bs * hd * (kv.is_int8() ? 1 : 2);
        for (int64_t nb = c0 + nbk; nb < std::min(n_blocks, c0 + nbk + bpc); ++nb) {
          const int64_t off = kv.RowOffset(block_table[nb], kv_head);
          const char* nk = kv.is_int8() ? reinterpret_cast<const char*>(kv.k8 + off)
                                        : reinterpret_cast<const char*>(kv.k + off);
          const char* nv = kv.is_int8() ? reinterpret_cast<const char*>(kv.v8 + off)
                                        : reinterpret_cast<const char*>(kv.v + off);
          for (int64_t c = 0; c < bytes; c += 64) {
            __builtin_prefetch(nk + c, 0, 2);
            __builtin_prefetch(nv + c, 0, 2);
          }
        }
      }
      // K is stored transposed ([head_dim][block_size]): a vector of scores (one lane per
      // key) is a chain of FMAs over dims with no transpose and no horizontal sums.
      float* HWY_RESTRICT kdst = kt + bi * hd * bs_pad;
      float* HWY_RESTRICT kconv = bs == bs_pad ? kdst : s.tmp.data();
      float* HWY_RESTRICT vdst = vt + bi * bs * hd;
      if (kv.is_int8()) {
        const int64_t off = kv.RowOffset(block, kv_head);
        ConvertI8Scaled(kv.k8 + off, kv.KScale(block, kv_head), kconv, bs * hd);
        ConvertI8Scaled(kv.v8 + off, kv.VScale(block, kv_head), vdst, rows_b * hd);
      } else {
        ConvertF16ToF32(kv.KRows(block, kv_head), kconv, bs * hd);
        ConvertF16ToF32(kv.VRows(block, kv_head), vdst, rows_b * hd);
      }
      if (bs != bs_pad) {
        for (int64_t d = 0; d < hd; ++d) {
          std::memcpy(kdst + d * bs_pad, kconv + d * bs, bs * sizeof(float));
          for (int64_t j = bs; j < bs_pad; ++j) kdst[d * bs_pad + j] = 0.0f;
        }
      }
    }

    for (int32_t i = 0; i < nq; ++i) {
      const int64_t pos = pos0 + i;
      if (pos < key0) continue;  // this chunk is entirely in token i's future
      // Columns [0, first) of the chunk are before token i's window.
      const int64_t first = variant.FirstKey(pos) - key0;
      if (first >= nbk * bs) continue;  // this chunk is entirely before token i's window
      // Keys [key0, key0 + rows) of the chunk; with padded blocks (bpc = 1) that is one block.
      const int64_t rows = std::min<int64_t>(nbk * bs, pos + 1 - key0);
      const int64_t n_vec = (rows + N - 1) / N;
      const float* HWY_RESTRICT qi = q + i * q_stride + static_cast<int64_t>(h0) * hd;
      // Scores of up to 4 heads × kKeyVecs key vectors at a time: the heads share each K
      // load, the key vectors each broadcast of q, and the FMA chains are independent.
#if HWY_TARGET <= HWY_AVX3
      constexpr int kKeyVecs = 4;
#else
      constexpr int kKeyVecs = 2;  // 4 × 2 accumulators + 2 K vectors of 16 registers
#endif
      for (int32_t g0 = 0; g0 < group; g0 += 4) {
        const int32_t gn = std::min<int32_t>(4, group - g0);
        for (int64_t v0 = 0; v0 < n_vec; v0 += kKeyVecs) {
          const int64_t nv = std::min<int64_t>(kKeyVecs, n_vec - v0);
          const float* kb[kKeyVecs];
          for (int64_t v = 0; v < kKeyVecs; ++v) {
            const int64_t key = (v0 + std::min(v, nv - 1)) * N;  // bs_pad multiple of N
            kb[v] = kt + (key / bs_pad) * hd * bs_pad + key % bs_pad;
          }
          VF a[4][kKeyVecs];
          for (int u = 0; u < 4; ++u)
            for (int v = 0; v < kKeyVecs; ++v) a[u][v] = hn::Zero(df);
          for (int64_t d = 0; d < hd; ++d) {
            VF k[kKeyVecs];
            for (int v = 0; v < kKeyVecs; ++v) k[v] = hn::LoadU(df, kb[v] + d * bs_pad);
            for (int u = 0; u < 4; ++u) {
              if (u >= gn) break;
              const auto qd = hn::Set(df, qi[static_cast<int64_t>(g0 + u) * hd + d]);
              for (int v = 0; v < kKeyVecs; ++v) a[u][v] = hn::MulAdd(qd, k[v], a[u][v]);
            }
          }
          for (int64_t v = 0; v < nv; ++v) {
            const int64_t j0 = (v0 + v) * N;
            auto live = hn::FirstN(df, static_cast<size_t>(std::min<int64_t>(N, rows - j0)));
            if (first > j0) {
              live = hn::AndNot(
                  hn::FirstN(df, static_cast<size_t>(std::min<int64_t>(N, first - j0))), live);
            }
            for (int32_t u = 0; u < gn; ++u) {
              auto raw = hn::Mul(a[u][v], vscale);
              if (capped) raw = hn::Mul(hn::Tanh(df, hn::Mul(raw, vinv_cap)), vcap);
              const auto sc = hn::IfThenElse(live, raw, neg_inf);
              hn::StoreU(sc, df, p_all + (g0 + u) * cw_pad + j0);
            }
          }
        }
      }
      // Tree keys outside token i's ancestors: masked. The chunk's first key (key 0, or one
      // before an earlier chunk) keeps the running max finite even if all of these are.
      if (tree != nullptr && pos >= tree->begin) {
        const uint64_t bits = tree->bits[i];
        for (int64_t j = std::max<int64_t>(0, tree->begin - key0); j < rows; ++j) {
          if ((bits >> (key0 + j - tree->begin)) & 1u) continue;
          for (int32_t g = 0; g < group; ++g) p_all[g * cw_pad + j] = -std::numeric_limits<float>::infinity();
        }
      }
      // Online softmax over the chunk, per head: new max, probabilities, correction.
      float corr[kPvHeads];
      for (int32_t g = 0; g < group; ++g) {
        const int64_t st = static_cast<int64_t>(i) * group + g;
        float* HWY_RESTRICT p = p_all + g * cw_pad;
        auto vmax = neg_inf;
        for (int64_t j0 = 0; j0 < rows; j0 += N) vmax = hn::Max(vmax, hn::LoadU(df, p + j0));
        const float c = SoftmaxChunk(p, (rows + N - 1) / N * N,
                                     hn::GetLane(hn::MaxOfLanes(df, vmax)), &s.m[st], &s.l[st]);
        if (hd % (4 * N) == 0) {
          // Head sizes of whole 4-vector slices (64 on AVX-512, 32 and 64 on AVX2): the
          // running sums of kPvHeads heads stay in registers across the chunk's rows, one
          // slice at a time, sharing each V load.
          corr[g % kPvHeads] = c;
          if (g % kPvHeads != kPvHeads - 1 && g + 1 != group) continue;
          const int32_t ga = g / kPvHeads * kPvHeads, gn = g + 1 - ga;
          const float* HWY_RESTRICT pa = p_all + ga * cw_pad;
          float* HWY_RESTRICT aa = s.acc.data() + (st - g + ga) * hd;
          for (int64_t d0 = 0; d0 < hd; d0 += 4 * N) {
            switch (gn) {
              case 1: AccumulatePv<1>(pa, cw_pad, vt, hd, d0, rows, corr, aa); break;
#if HWY_TARGET <= HWY_AVX3
              case 2: AccumulatePv<2>(pa, cw_pad, vt, hd, d0, rows, corr, aa); break;
              case 3: AccumulatePv<3>(pa, cw_pad, vt, hd, d0, rows, corr, aa); break;
              default: AccumulatePv<4>(pa, cw_pad, vt, hd, d0, rows, corr, aa); break;
#else
              default: AccumulatePv<2>(pa, cw_pad, vt, hd, d0, rows, corr, aa); break;
#endif
            }
          }
          continue;
        }
        float* HWY_RESTRICT acc = s.acc.data() + st * hd;
        if (c != 1.0f) {
          const auto vc = hn::Set(df, c);
          for (int64_t d = 0; d < hd; d += N) {
            const auto mask = hn::FirstN(df, static_cast<size_t>(hd - d));
            hn::BlendedStore(hn::Mul(hn::LoadU(df, acc + d), vc), mask, df, acc + d);
          }
        }
        for (int64_t j = 0; j < rows; ++j) {
          const auto pj = hn::Set(df, p[j]);
          const float* HWY_RESTRICT vj = vt + j * hd;
          int64_t d = 0;
          for (; d + N <= hd; d += N)
            hn::StoreU(hn::MulAdd(pj, hn::LoadU(df, vj + d), hn::LoadU(df, acc + d)), df, acc + d);
          for (; d < hd; ++d) acc[d] += p[j] * vj[d];
        }
      }
    }
  }
  for (int32_t i = 0; i < nq; ++i) {
    for (int32_t g = 0; g < group; ++g) {
      const int64_t st = static_cast<int64_t>(i) * group + g;
      Scale(s.acc.data() + st * hd, 1.0f / s.l[st],
            out + i * out_stride + static_cast<int64_t>(h0 + g) * hd, hd);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {

HWY_EXPORT(AttentionTile);

void PagedAttentionTile(const float* q, int64_t q_stride, int32_t nq, int64_t pos0,
                        int32_t n_heads, int32_t kv_head, const PagedKvView& kv,
                        const int32_t* block_table, float scale, float* out,
                        int64_t out_stride, const AttentionVariant& variant,
                        const TreeMask* tree) {
  TARMAC_DCHECK(nq >= 1 && pos0 >= 0 && kv.n_kv_heads > 0 && n_heads % kv.n_kv_heads == 0);
  TARMAC_DCHECK(kv_head >= 0 && kv_head < kv.n_kv_heads);
  TARMAC_DCHECK(variant.window >= 0 && variant.softcap >= 0.0f);
  TARMAC_DCHECK(tree == nullptr || (tree->begin >= 1 && variant.window == 0 &&
                                    pos0 + nq - 1 - tree->begin < 64 && tree->bits != nullptr));
  HWY_DYNAMIC_DISPATCH(AttentionTile)(q, q_stride, nq, pos0, n_heads, kv_head, kv, block_table,
                                      scale, out, out_stride, variant, tree);
}

namespace {
// Element d of row j (a position) of K (kv_index 0) or V (1), through the block table.
double KvValue(const PagedKvView& kv, int kv_index, const int32_t* block_table, int64_t j,
               int32_t head, int32_t d) {
  const int32_t block = block_table[j / kv.block_size];
  const int64_t row = j % kv.block_size;
  const int64_t idx = kv.RowOffset(block, head) +
                      (kv_index == 0 ? d * kv.block_size + row : row * kv.head_dim + d);
  if (kv.is_int8()) {
    const int8_t q = (kv_index == 0 ? kv.k8 : kv.v8)[idx];
    return static_cast<double>(q) * (kv_index == 0 ? kv.KScale(block, head) : kv.VScale(block, head));
  }
  return F16ToF32((kv_index == 0 ? kv.k : kv.v)[idx]);
}
}  // namespace

void PagedAttentionRef(const float* q, int32_t n_heads, const PagedKvView& kv,
                       const int32_t* block_table, int64_t n_ctx, float scale, float* out,
                       const AttentionVariant& variant, const TreeMask* tree) {
  const int32_t hd = kv.head_dim;
  const int32_t group = n_heads / kv.n_kv_heads;
  const int64_t first = variant.FirstKey(n_ctx - 1);
  auto visible = [&](int64_t j) {
    return tree == nullptr || j < tree->begin || ((tree->bits[0] >> (j - tree->begin)) & 1u);
  };
  std::vector<double> s(n_ctx);
  for (int32_t h = 0; h < n_heads; ++h) {
    const int32_t kvh = h / group;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = first; j < n_ctx; ++j) {
      if (!visible(j)) continue;
      double d = 0;
      for (int32_t i = 0; i < hd; ++i)
        d += static_cast<double>(q[h * hd + i]) * KvValue(kv, 0, block_table, j, kvh, i);
      s[j] = scale * d;
      if (variant.softcap > 0) s[j] = variant.softcap * std::tanh(s[j] / variant.softcap);
      mx = std::max(mx, s[j]);
    }
    double z = 0;
    for (int64_t j = first; j < n_ctx; ++j) z += (s[j] = visible(j) ? std::exp(s[j] - mx) : 0.0);
    for (int32_t i = 0; i < hd; ++i) {
      double acc = 0;
      for (int64_t j = first; j < n_ctx; ++j)
        acc += s[j] / z * KvValue(kv, 1, block_table, j, kvh, i);
      out[h * hd + i] = static_cast<float>(acc);
    }
  }
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
