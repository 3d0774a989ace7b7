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

// Key and value vectors as f32: from the f32 scratch of a chunk, or widened in registers
// straight from an f16 cache block (one query token: each K/V value is used once per head,
// so a copy to scratch would cost more than it saves).
HWY_INLINE hn::Vec<DF> LoadF32(const float* HWY_RESTRICT p) { return hn::LoadU(DF(), p); }
HWY_INLINE hn::Vec<DF> LoadF32(const hwy::float16_t* HWY_RESTRICT p) {
  return hn::PromoteTo(DF(), hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
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
// the U heads. p rows at stride p_stride, acc rows at stride hd; V row j is row j % block_rows
// of vblocks[j / block_rows], rows at stride hd (the chunk's scratch copy: one block of all
// the rows; the cache: its blocks).
template <int U, typename TV>
HWY_INLINE void AccumulatePv(const float* HWY_RESTRICT p, int64_t p_stride,
                             const TV* const* vblocks, int64_t block_rows, int64_t hd,
                             int64_t d0, int64_t rows, const float* corr,
                             float* HWY_RESTRICT acc) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  using VF = decltype(hn::Zero(df));
  VF a[U][4];
  for (int u = 0; u < U; ++u) {
    const auto vc = hn::Set(df, corr[u]);
    for (int k = 0; k < 4; ++k) a[u][k] = hn::Mul(hn::LoadU(df, acc + u * hd + d0 + k * N), vc);
  }
  for (int64_t j0 = 0, b = 0; j0 < rows; j0 += block_rows, ++b) {
    const TV* HWY_RESTRICT vb = vblocks[b] + d0;
    const int64_t n = std::min(block_rows, rows - j0);
    for (int64_t j = 0; j < n; ++j) {
      VF pj[U];
      for (int u = 0; u < U; ++u) pj[u] = hn::Set(df, p[u * p_stride + j0 + j]);
      for (int k = 0; k < 4; ++k) {  // one V vector live at a time: 4·U + U + 1 registers
        const auto vk = LoadF32(vb + j * hd + k * N);
        for (int u = 0; u < U; ++u) a[u][k] = hn::MulAdd(pj[u], vk, a[u][k]);
      }
    }
  }
  for (int u = 0; u < U; ++u)
    for (int k = 0; k < 4; ++k) hn::StoreU(a[u][k], df, acc + u * hd + d0 + k * N);
}

// AccumulatePv for gn (1..4) heads.
template <typename TV>
HWY_INLINE void AccumulatePvHeads(int32_t gn, const float* HWY_RESTRICT p, int64_t p_stride,
                                  const TV* const* vblocks, int64_t block_rows, int64_t hd,
                                  int64_t d0, int64_t rows, const float* corr,
                                  float* HWY_RESTRICT acc) {
  switch (gn) {
    case 1: return AccumulatePv<1>(p, p_stride, vblocks, block_rows, hd, d0, rows, corr, acc);
    case 2: return AccumulatePv<2>(p, p_stride, vblocks, block_rows, hd, d0, rows, corr, acc);
    case 3: return AccumulatePv<3>(p, p_stride, vblocks, block_rows, hd, d0, rows, corr, acc);
    default: return AccumulatePv<4>(p, p_stride, vblocks, block_rows, hd, d0, rows, corr, acc);
  }
}

// L2 hints for K/V blocks a chunk is about to read, given out a few lines at a time during
// the chunk's score loop: blocks are scattered, so the hardware prefetcher cannot run ahead,
// and a burst of hints fills the miss buffers and stalls the loads in flight. Regions are
// hinted in the order they were added.
struct PrefetchQueue {
  static constexpr int kMaxBlocks = 8;
  static constexpr int kMax = 4 * kMaxBlocks;  // K and V of this chunk's and the next's
  const char* region[kMax] = {};
  int n = 0;              // regions queued
  int64_t bytes = 0;      // per region (one block of one KV head's K, or of its V)
  int64_t per_step = 1;   // lines per Step
  int r = 0;              // the region being hinted
  int64_t off = 0;        // bytes of it hinted so far
  void Add(const void* p) {
    if (n < kMax) region[n++] = static_cast<const char*>(p);
  }
  int64_t Lines() const { return n * bytes / 64; }
  void Step() {
    for (int64_t i = 0; i < per_step && r < n; ++i) {
      __builtin_prefetch(region[r] + off, 0, 2);
      off += 64;
      if (off >= bytes) {
        off = 0;
        ++r;
      }
    }
  }
  void Drain() {
    per_step = Lines() + 1;  // more than are left
    Step();
  }
};

// Scores of gn (<= 4) heads (q rows at qh, head_dim apart) against kKeyVecs key vectors: a[u][v]
// = sum_d qh[u][d] · kb[v][d · kstride], one FMA chain over d per score vector. The heads
// share each K load, the key vectors each broadcast of q, and the chains are independent.
template <int kKeyVecs, int G, typename TK>
HWY_INLINE void ScoreVectorsG(const float* HWY_RESTRICT qh, int64_t hd, const TK* const* kb,
                              int64_t kstride, hn::Vec<DF> (*HWY_RESTRICT a)[kKeyVecs],
                              PrefetchQueue* pf) {
  const DF df;
  for (int u = 0; u < G; ++u)
    for (int v = 0; v < kKeyVecs; ++v) a[u][v] = hn::Zero(df);
  for (int64_t d = 0; d < hd; ++d) {
    if (pf != nullptr) pf->Step();
    hn::Vec<DF> k[kKeyVecs];
    for (int v = 0; v < kKeyVecs; ++v) k[v] = LoadF32(kb[v] + d * kstride);
    for (int u = 0; u < G; ++u) {
      const auto qd = hn::Set(df, qh[static_cast<int64_t>(u) * hd + d]);
      for (int v = 0; v < kKeyVecs; ++v) a[u][v] = hn::MulAdd(qd, k[v], a[u][v]);
    }
  }
}

template <int kKeyVecs, typename TK>
HWY_INLINE void ScoreVectors(const float* HWY_RESTRICT qh, int64_t hd, int32_t gn,
                             const TK* const* kb, int64_t kstride,
                             hn::Vec<DF> (*HWY_RESTRICT a)[kKeyVecs], PrefetchQueue* pf) {
  switch (gn) {
    case 1: return ScoreVectorsG<kKeyVecs, 1>(qh, hd, kb, kstride, a, pf);
    case 2: return ScoreVectorsG<kKeyVecs, 2>(qh, hd, kb, kstride, a, pf);
    case 3: return ScoreVectorsG<kKeyVecs, 3>(qh, hd, kb, kstride, a, pf);
    default: return ScoreVectorsG<kKeyVecs, 4>(qh, hd, kb, kstride, a, pf);
  }
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
    Scale(o + r * hd, variant.InverseDenominator(h0 + r % group, sc.m[r], sc.l[r]),
          out + (r / group) * out_stride + (h0 + r % group) * hd, hd);
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
  if (tree == nullptr && AttentionAmxUsable(nq, group, kv)) {
    return AttentionTileAmx(q, q_stride, nq, pos0, group, h0, kv_head, kv, block_table, scale,
                            variant, out, out_stride);
  }
  // Keys are taken in chunks of whole blocks, up to kChunkKeys keys (blocks whose size is not
  // a multiple of the vector length: one block, padded): each query's online-softmax update
  // (max, exp of the correction, rescaling the running sums) happens once per chunk, and the
  // scores of a chunk are register-blocked over up to 4 key vectors and 4 heads.
  // One query token with f16 K/V in blocks of whole vectors and heads of whole 4-vector
  // slices (decode, and a one-token prefill chunk): the same arithmetic, in the same order,
  // with K and V widened in registers straight from the cache blocks instead of a chunk's
  // scratch copy. The order being the same keeps a token's attention bit-identical whether it
  // is computed alone or in a tile (batch invariance).
  constexpr int64_t kChunkKeys = 64;
#if HWY_TARGET <= HWY_AVX3
  constexpr int kKeyVecs = 4;  // score vectors per pass
#else
  constexpr int kKeyVecs = 2;  // 4 × 2 accumulators + 2 K vectors of 16 registers
#endif
  const int64_t bpc = bs == bs_pad ? std::max<int64_t>(1, kChunkKeys / bs) : 1;  // blocks
  const int64_t cw_pad = bpc * bs_pad;  // score columns per head
  const bool direct = nq == 1 && !kv.is_int8() && TARMAC_HWY_HARDWARE_F16 && bs == bs_pad &&
                      hd % (4 * N) == 0 && bpc <= PrefetchQueue::kMaxBlocks;
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
    PrefetchQueue pf;
    if (direct) {
      // In the order they are read: this chunk's K after its first block (the first pass
      // reads that at once), its V (read after the scores), then the next chunk's K and V.
      pf.bytes = bs * hd * 2;
      for (int64_t b = c0 + 1; b < c0 + nbk; ++b) pf.Add(kv.KRows(block_table[b], kv_head));
      for (int64_t b = c0; b < c0 + nbk; ++b) pf.Add(kv.VRows(block_table[b], kv_head));
      for (int64_t b = c0 + nbk; b < std::min(n_blocks, c0 + nbk + bpc); ++b) {
        pf.Add(kv.KRows(block_table[b], kv_head));
        pf.Add(kv.VRows(block_table[b], kv_head));
      }
      const int64_t passes = (nbk * bs / N + kKeyVecs - 1) / kKeyVecs * ((group + 3) / 4);
      const int64_t steps = std::max<int64_t>(1, hd * passes);  // of the score loop
      pf.per_step = (pf.Lines() + steps - 1) / steps;
    }
    // The chunk's f32 scratch copy (not in direct mode, which reads the cache blocks).
    for (int64_t bi = 0; !direct && bi < nbk; ++bi) {
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
      // Scores of up to 4 heads × kKeyVecs key vectors at a time (ScoreVectors).
      for (int32_t g0 = 0; g0 < group; g0 += 4) {
        const int32_t gn = std::min<int32_t>(4, group - g0);
        const float* HWY_RESTRICT qh = qi + static_cast<int64_t>(g0) * hd;
        for (int64_t v0 = 0; v0 < n_vec; v0 += kKeyVecs) {
          const int64_t nv = std::min<int64_t>(kKeyVecs, n_vec - v0);
          VF a[4][kKeyVecs];
          if (direct) {
            const hwy::float16_t* kb[kKeyVecs];
            for (int64_t v = 0; v < kKeyVecs; ++v) {
              const int64_t key = (v0 + std::min(v, nv - 1)) * N;  // bs a multiple of N
              kb[v] = reinterpret_cast<const hwy::float16_t*>(
                          kv.KRows(block_table[c0 + key / bs], kv_head)) + key % bs;
            }
            ScoreVectors<kKeyVecs>(qh, hd, gn, kb, bs, a, &pf);
          } else {
            const float* kb[kKeyVecs];
            for (int64_t v = 0; v < kKeyVecs; ++v) {
              const int64_t key = (v0 + std::min(v, nv - 1)) * N;  // bs_pad multiple of N
              kb[v] = kt + (key / bs_pad) * hd * bs_pad + key % bs_pad;
            }
            ScoreVectors<kKeyVecs>(qh, hd, gn, kb, bs_pad, a, nullptr);
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
      if (direct) pf.Drain();
      // Online softmax over the chunk, per head: new max, probabilities, correction.
      // Heads whose P·V sums share each V load: with K/V read from the cache (direct), all of a
      // KV head's (up to 4): each V row is then widened once, not once per kPvHeads heads.
      const int32_t pv_heads = direct ? 4 : kPvHeads;
      // Zeroed: each P·V pass reads the corrections of its gn heads only, set just before, which
      // the compiler cannot see through the switch on gn.
      float corr[4] = {0.0f, 0.0f, 0.0f, 0.0f};
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
          corr[g % pv_heads] = c;
          if (g % pv_heads != pv_heads - 1 && g + 1 != group) continue;
          const int32_t ga = g / pv_heads * pv_heads, gn = g + 1 - ga;
          const float* HWY_RESTRICT pa = p_all + ga * cw_pad;
          float* HWY_RESTRICT aa = s.acc.data() + (st - g + ga) * hd;
          const float* vt_blocks[1] = {vt};
          const hwy::float16_t* vh_blocks[PrefetchQueue::kMaxBlocks];
          if (direct) {
            for (int64_t bi = 0; bi * bs < rows; ++bi) {
              vh_blocks[bi] = reinterpret_cast<const hwy::float16_t*>(
                  kv.VRows(block_table[c0 + bi], kv_head));
            }
          }
          for (int64_t d0 = 0; d0 < hd; d0 += 4 * N) {
            if (direct) {
              AccumulatePvHeads(gn, pa, cw_pad, vh_blocks, bs, hd, d0, rows, corr, aa);
            } else {
              AccumulatePvHeads(gn, pa, cw_pad, vt_blocks, rows, hd, d0, rows, corr, aa);
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
      Scale(s.acc.data() + st * hd, variant.InverseDenominator(h0 + g, s.m[st], s.l[st]),
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
    double z = variant.sinks != nullptr ? std::exp(variant.sinks[h] - mx) : 0.0;
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
