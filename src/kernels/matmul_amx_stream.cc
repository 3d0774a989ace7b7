// MatMulAmxStream (see matmul_amx_stream.h): weights split per K step in registers, one token
// tile.
//
// Only the functions marked TARMAC_AMX use AMX/AVX-512; they run only after AmxEnabled() (the
// entry points check it).

#include "kernels/matmul_amx_stream.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>

#include "base/check.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_amx_tiles-inl.h"
#include "tensor/aligned_buffer.h"

namespace tarmac::kernels {
namespace {

// K steps per chunk: each weight row is read in runs of kChunk · 64 bytes (f16), a few rows
// at a time, rather than 32 rows side by side one line each (32 streams at once, which the
// hardware prefetchers and the line fill buffers serve poorly).
constexpr int64_t kChunk = 8;
static const int64_t kPrefetch = [] {
  const char* e = std::getenv("TARMAC_PF");  // TEMPORARY (measurement)
  return e ? std::atol(e) : 1;
}();

constexpr int64_t kWTile = kTile * kKStep;   // u16 per A tile
constexpr int64_t kWStep = 4 * kWTile;       // u16 per K step: hi 2 tiles, lo 2 tiles

// The matrices of one call and their row blocks (32 rows), numbered across the matrices.
struct Blocks {
  const MatrixView* const* ws;
  float* const* ys;
  int n;
  int64_t first[kAmxStreamMaxShared + 1];  // global index of each matrix's first block

  int MatrixOf(int64_t gblk) const {
    int i = 0;
    while (gblk >= first[i + 1]) ++i;
    return i;
  }
};

// Steps [s0, s0 + ns) of global block gblk, and where its rows are.
struct Chunk {
  int64_t gblk = 0, s0 = 0, ns = 0;
  const MatrixView* w = nullptr;
  int mi = 0;
  int64_t r0 = 0;
  int n_rows = 0;
};

inline Chunk MakeChunk(const Blocks& b, int64_t gblk, int64_t s0, int64_t steps) {
  Chunk c;
  c.gblk = gblk;
  c.s0 = s0;
  c.ns = std::min(kChunk, steps - s0);
  c.mi = b.MatrixOf(gblk);
  c.w = b.ws[c.mi];
  c.r0 = (gblk - b.first[c.mi]) * kRowBlock;
  c.n_rows = static_cast<int>(std::min<int64_t>(kRowBlock, c.w->rows - c.r0));
  return c;
}

inline Chunk NextChunk(const Blocks& b, const Chunk& c, int64_t steps) {
  if (c.s0 + c.ns < steps) return MakeChunk(b, c.gblk, c.s0 + c.ns, steps);
  return MakeChunk(b, c.gblk + 1, 0, steps);
}

// Rows [rr0, rr1) of chunk c, all its steps, into buf ([step][hi 2 tiles, lo 2 tiles] bf16,
// rows >= n_rows and k >= K zero). BF16 writes hi only (its lo is zero and never read).
template <DType T>
TARMAC_AMX inline void SplitWeightRows(const Chunk& c, int rr0, int rr1, uint16_t* buf,
                                       const Chunk* pf = nullptr) {
  const int64_t K = c.w->cols;
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int rr = rr0; rr < rr1; ++rr) {
    const uint8_t* row = rr < c.n_rows ? c.w->row(c.r0 + rr) : nullptr;
    const char* pf_row = pf != nullptr && rr < pf->n_rows
                             ? reinterpret_cast<const char*>(pf->w->row(pf->r0 + rr)) +
                                   RowBytes(pf->w->type, pf->s0 * kKStep)
                             : nullptr;
    const int64_t pf_ns = pf_row != nullptr ? pf->ns : 0;
    for (int64_t q = 0; q < c.ns; ++q) {
      if (q < pf_ns) {
        for (int64_t o = 0; o < RowBytes(T, kKStep); o += 64)
          _mm_prefetch(pf_row + q * RowBytes(T, kKStep) + o, _MM_HINT_T1);
      }
      uint16_t* h = buf + q * kWStep + rr * kKStep;
      uint16_t* l = h + 2 * kWTile;
      if (row == nullptr) {
        _mm512_store_si512(h, _mm512_setzero_si512());
        if constexpr (T != DType::kBF16) _mm512_store_si512(l, _mm512_setzero_si512());
        continue;
      }
      const int64_t k0 = (c.s0 + q) * kKStep;
      const int64_t valid = std::min<int64_t>(kKStep, K - k0);
      if constexpr (T == DType::kF32) {
        Split32(reinterpret_cast<const float*>(row) + k0, valid, h, l);
      } else {
        const __mmask32 mask = valid >= 32 ? ~__mmask32{0} : (__mmask32{1} << valid) - 1;
        const __m512i v =
            _mm512_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + k0);
        if constexpr (T == DType::kBF16) {
          _mm512_store_si512(h, v);
        } else {
          // As StageWeights (matmul_amx.cc): the f32 of an f16 with its low 16 bits cleared is
          // a bf16 (the top 8 significant bits), and the other 3 bits, v - hi, are one too.
          const __m512 a = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
          const __m512 bb = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
          const __m512 ha = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), top));
          const __m512 hb = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(bb), top));
          const __m512bh vh = _mm512_cvtne2ps_pbh(hb, ha);  // exact: the low halves are zero
          const __m512bh vl = _mm512_cvtne2ps_pbh(_mm512_sub_ps(bb, hb), _mm512_sub_ps(a, ha));
          _mm512_store_si512(h, reinterpret_cast<const __m512i&>(vh));
          _mm512_store_si512(l, reinterpret_cast<const __m512i&>(vl));
        }
      }
    }
  }
}

// Rows [rr0, rr1) of chunk c into L2.
inline void PrefetchRows(const Chunk& c, int rr0, int rr1) {
  const int64_t begin = RowBytes(c.w->type, c.s0 * kKStep);
  const int64_t end = std::min(RowBytes(c.w->type, c.w->cols),
                               RowBytes(c.w->type, (c.s0 + c.ns) * kKStep));
  for (int rr = rr0; rr < std::min(rr1, c.n_rows); ++rr) {
    const char* row = reinterpret_cast<const char*>(c.w->row(c.r0 + rr));
    for (int64_t o = begin; o < end; o += 64) _mm_prefetch(row + o, _MM_HINT_T1);
  }
}

// Global blocks [blk0, blk1) on this thread, chunk by chunk: chunk c's tile products, while
// the vector units split chunk c + 1 (a few rows per step) and its rows of chunk c + 2 are
// prefetched. Each block's C (tiles 0-1 the products with x_hi, 2-3 those with x_lo: four
// short dependency chains per step rather than two long ones) stays in tiles over all of K,
// then is written transposed into y.
template <DType T>
TARMAC_AMX void RunBlocks(const Blocks& b, const float* x, int64_t n_tokens, int64_t blk0,
                          int64_t blk1) {
  const int64_t K = b.ws[0]->cols;
  const int64_t steps = (K + kKStep - 1) / kKStep;
  thread_local AlignedBuffer x_store, w_store;
  // The split activations, [steps][16 k pairs][16 tokens] u32 each for hi and lo: staged during
  // this thread's first block, a chunk ahead of its products.
  if (x_store.size() < static_cast<size_t>(steps * 2048)) x_store.Resize(steps * 2048);
  uint32_t* const xh = x_store.as<uint32_t>();
  uint32_t* const xl = xh + steps * 256;
  // Two chunk buffers: one is split while the other multiplies.
  const size_t wbytes = static_cast<size_t>(2 * kChunk * kWStep * 2);
  if (w_store.size() < wbytes) w_store.Resize(wbytes);
  uint16_t* const wbuf = w_store.as<uint16_t>();
  constexpr bool kLo = T != DType::kBF16;
  const __m512i col = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(16));
  AmxConfigureTiles();
  Chunk cur = MakeChunk(b, blk0, 0, steps);
  StageActivations(x, K, n_tokens, 0, 0, 1, steps, cur.s0, cur.s0 + cur.ns, xh, xl);
  SplitWeightRows<T>(cur, 0, kRowBlock, wbuf);
  Chunk next, after;
  bool has_next = cur.s0 + cur.ns < steps || blk0 + 1 < blk1;
  if (has_next) next = NextChunk(b, cur, steps);
  bool has_after = has_next && (next.s0 + next.ns < steps || next.gblk + 1 < blk1);
  if (has_after) after = NextChunk(b, next, steps);
  if (kPrefetch && has_next) PrefetchRows(next, 0, kRowBlock);
  for (int64_t ci = 0;; ++ci) {
    uint16_t* cbuf = wbuf + (ci & 1) * kChunk * kWStep;
    uint16_t* nbuf = wbuf + ((ci + 1) & 1) * kChunk * kWStep;
    if (cur.s0 == 0) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
    }
    for (int64_t q = 0; q < cur.ns; ++q) {
      const int64_t s = cur.s0 + q;
      const uint16_t* wq = cbuf + q * kWStep;
      _tile_loadd(6, xh + s * 256, 64);
      _tile_loadd(7, xl + s * 256, 64);
      _tile_loadd(4, wq, 64);
      _tile_loadd(5, wq + kWTile, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(2, 4, 7);
      _tile_dpbf16ps(1, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
      // This step's share of the next chunk's rows (all of them by the chunk's last step),
      // on the vector units while the tiles multiply.
      const int rr0 = static_cast<int>(q * kRowBlock / cur.ns);
      const int rr1 = static_cast<int>((q + 1) * kRowBlock / cur.ns);
      if (kPrefetch == 2) {
        if (has_next) SplitWeightRows<T>(next, rr0, rr1, nbuf, has_after ? &after : nullptr);
      } else {
        if (has_next) SplitWeightRows<T>(next, rr0, rr1, nbuf);
        if (kPrefetch && has_after) PrefetchRows(after, rr0, rr1);
      }
      if constexpr (kLo) {
        _tile_loadd(4, wq + 2 * kWTile, 64);
        _tile_loadd(5, wq + 3 * kWTile, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 5, 6);
      }
    }
    if (cur.s0 + cur.ns == steps) {
      // c[i]: weight rows r0 + 16(i % 2) + m, token n at m·16 + n; tiles i and i + 2 summed.
      alignas(64) float c[4][256];
      _tile_stored(0, c[0], 64);
      _tile_stored(1, c[1], 64);
      _tile_stored(2, c[2], 64);
      _tile_stored(3, c[3], 64);
      float* y = b.ys[cur.mi];
      const int64_t y_stride = cur.w->rows;
      for (int i = 0; i < 2; ++i) {
        const int64_t rb = cur.r0 + i * kTile;
        const int rows_here = static_cast<int>(std::min<int64_t>(kTile, y_stride - rb));
        if (rows_here <= 0) break;
        for (int m = 0; m < kTile; ++m) {
          _mm512_store_ps(c[i] + m * 16, _mm512_add_ps(_mm512_load_ps(c[i] + m * 16),
                                                       _mm512_load_ps(c[i + 2] + m * 16)));
        }
        const __mmask16 mask =
            rows_here >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << rows_here) - 1);
        for (int64_t t = 0; t < n_tokens; ++t) {
          _mm512_mask_storeu_ps(y + t * y_stride + rb, mask,
                                _mm512_i32gather_ps(col, c[i] + t, 4));
        }
      }
    }
    if (!has_next) break;
    // The activations of the next chunk's steps, while this thread's first block runs.
    if (next.gblk == blk0) {
      StageActivations(x, K, n_tokens, 0, 0, 1, steps, next.s0, next.s0 + next.ns, xh, xl);
    }
    cur = next;
    has_next = has_after;
    next = after;
    has_after = has_next && (next.s0 + next.ns < steps || next.gblk + 1 < blk1);
    if (has_after) after = NextChunk(b, next, steps);
  }
  AmxReleaseTiles();
}

}  // namespace

void MatMulAmxStreamShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                           int64_t n_tokens, ThreadPool* pool) {
  TARMAC_CHECK(AmxEnabled());
  TARMAC_CHECK(n >= 1 && n <= kAmxStreamMaxShared);
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= kAmxStreamMaxTokens);
  Blocks b{ws, ys, n, {0}};
  for (int i = 0; i < n; ++i) {
    TARMAC_CHECK(AmxStreamSupports(ws[i]->type) && ws[i]->type == ws[0]->type);
    TARMAC_CHECK(ws[i]->rows >= 1 && ws[i]->cols == ws[0]->cols);
    b.first[i + 1] = b.first[i] + (ws[i]->rows + kRowBlock - 1) / kRowBlock;
  }
  if (ws[0]->cols == 0) {
    for (int i = 0; i < n; ++i) std::fill(ys[i], ys[i] + n_tokens * ws[i]->rows, 0.0f);
    return;
  }
  const int64_t n_blocks = b.first[n];
  auto run = [&](int64_t b0, int64_t b1, int) {
    switch (ws[0]->type) {
      case DType::kF16: return RunBlocks<DType::kF16>(b, x, n_tokens, b0, b1);
      case DType::kBF16: return RunBlocks<DType::kBF16>(b, x, n_tokens, b0, b1);
      default: return RunBlocks<DType::kF32>(b, x, n_tokens, b0, b1);
    }
  };
  // One contiguous range of blocks per thread: it stages x once and its prefetches run ahead
  // along its own range.
  if (pool == nullptr || pool->num_threads() == 1 || n_blocks == 1) {
    run(0, n_blocks, 0);
  } else {
    pool->ParallelFor(n_blocks, (n_blocks + pool->num_threads() - 1) / pool->num_threads(), run);
  }
}

void MatMulAmxStream(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                     ThreadPool* pool) {
  const MatrixView* ws[1] = {&w};
  float* ys[1] = {y};
  MatMulAmxStreamShared(ws, ys, 1, x, n_tokens, pool);
}

}  // namespace tarmac::kernels
