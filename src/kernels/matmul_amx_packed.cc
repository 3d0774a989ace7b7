// The AMX GEMM on pre-split weights (AmxPackedMatrix; see matmul_amx.h): activations are tile
// A in their own row-major order, the weights' pair-layout tiles are B, and each C tile is 16
// tokens × 16 weight rows, stored straight into y.
//
// Only the functions marked TARMAC_AMX use AMX/AVX-512; they run only after AmxBf16Available()
// said yes (every entry point is reached through MatMulAmx / MatMulAmxShared).

#include "kernels/x86_intrinsics.h"  // <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_amx_tiles-inl.h"
#include "kernels/matmul_int8.h"
#include "kernels/matvec.h"
#include "kernels/ops.h"
#include "tensor/aligned_buffer.h"

namespace tarmac::kernels {
namespace {

// ---- Roles swapped against matmul_amx.cc: with the weights split and transposed into the
// pair layout once (AmxPackedMatrix), the activations become tile A in their natural
// row-major order (no gathers to stage them) and each C tile is 16 tokens × 16 weight rows,
// y's own layout (stored straight into y, no transposition).

// Rows [tt_begin, tt_end) of the pass's activations, columns [k0, k0 + kc) (k0 and kc
// multiples of 32), split into row-major hi/lo bf16 rows `stride` elements apart: token t0 + tt
// at xh + tt·stride (tokens >= n_tokens and k >= K are zero).
TARMAC_AMX void SplitActivationRows(const float* x, int64_t K, int64_t k0, int64_t kc,
                                    int64_t stride, int64_t n_tokens, int64_t t0,
                                    int64_t tt_begin, int64_t tt_end, uint16_t* xh,
                                    uint16_t* xl) {
  for (int64_t tt = tt_begin; tt < tt_end; ++tt) {
    const int64_t t = t0 + tt;
    for (int64_t k = 0; k < kc; k += kKStep) {
      const int64_t valid = t < n_tokens ? std::min<int64_t>(kKStep, K - k0 - k) : 0;
      Split32(x + t * K + k0 + k, valid, xh + tt * stride + k, xl + tt * stride + k);
    }
  }
}

// Nibble-coded lo of one K step (AmxPackedMatrix, kNibble) -> its 1024 bf16, hi's order
// (groups [g0, g1) of 64 values each, 16 in a step):
// lo = ±n·2^(e-10) rebuilt from hi's sign and exponent bits (hi & 0xFF80) plus, per n, the
// exponent offset and mantissa of n as a bf16 (n = 1: 2^-10; 2, 3: 2^-9 · 1.0, 1.5; 4-7:
// 2^-8 · 1.0, 1.25, 1.5, 1.75); n = 0 gives +0. hi's exponent is at least 103 (f16's
// smallest subnormal), so the offset never borrows from the sign.
TARMAC_AMX inline void DecodeLo(const uint16_t* hi, const uint8_t* nib, uint16_t* lo, int g0,
                                int g1) {
  const __m512i table = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, -928, -960, -992, -1024, -1088, -1152,
                                         -1280, 0);
  const __m512i sign_exp = _mm512_set1_epi16(static_cast<int16_t>(0xFF80));
  const __m512i low4 = _mm512_set1_epi16(0x0F);
  for (int g = g0; g < g1; ++g) {
    const __m512i b =
        _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(nib + g * 32)));
    const __m512i n0 = _mm512_and_si512(b, low4), n1 = _mm512_srli_epi16(b, 4);
    const __m512i h0 = _mm512_load_si512(hi + g * 64), h1 = _mm512_load_si512(hi + g * 64 + 32);
    _mm512_store_si512(lo + g * 64,
                       _mm512_maskz_add_epi16(_mm512_test_epi16_mask(n0, n0),
                                              _mm512_and_si512(h0, sign_exp),
                                              _mm512_permutexvar_epi16(n0, table)));
    _mm512_store_si512(lo + g * 64 + 32,
                       _mm512_maskz_add_epi16(_mm512_test_epi16_mask(n1, n1),
                                              _mm512_and_si512(h1, sign_exp),
                                              _mm512_permutexvar_epi16(n1, table)));
  }
}

// Where a row block's nibble-coded W_lo is rebuilt (ComputeBlockPacked).
struct LoStage {
  uint16_t* steps = nullptr;          // [ns][1024]: step s's W_lo
  const uint16_t* step0 = nullptr;    // step 0's, rebuilt by the previous block, or nullptr
  // The next row block's step 0 (hi, nibbles), to rebuild into next_out during this block's
  // last step, or nullptr.
  const uint16_t* next_hi = nullptr;
  const uint8_t* next_nib = nullptr;
  uint16_t* next_out = nullptr;
};

// One row block (pre-split weights wh/wl for steps [s0, s0 + ns)) times every token tile of
// the pass (xh/xl: the same K chunk of the split activations, rows kp elements apart). cacc:
// this row block's C between K chunks, [token pair][4 tiles][16][16]. (No software prefetch
// of the weights: the hardware streams the sequential tiles, and prefetching a few steps or a
// row block ahead was slower; bench/NOTES.md.)
TARMAC_AMX void ComputeBlockPacked(const uint16_t* xh, const uint16_t* xl, int64_t kp,
                                   const uint16_t* wh, const uint16_t* wl, const uint8_t* wn,
                                   const LoStage& lo, int64_t ns, bool first, bool last,
                                   int64_t tp, int64_t t0, int64_t n_tokens, int64_t r0,
                                   int64_t r1, float* y, int64_t y_stride, float* cacc) {
  const int64_t xs = kp * 2;  // bytes between token rows
  for (int64_t jp = 0; jp < tp / kTile; jp += 2) {
    float* c = cacc + jp * 2 * 256;  // tile (j, i) at (j·2 + i)·256: 0 (j0,i0) 1 (j0,i1) ...
    // An odd last token tile runs alone (C tiles 0 and 1, A tile 4 only): a batch of, say,
    // 65 tokens then costs 5 tile columns of work, not 6.
    const bool single = jp + 1 == tp / kTile;
    if (single) {
      StartC2(first, c, c + 256);
    } else {
      StartC(first, c, c + 256, c + 512, c + 768);
    }
    const uint16_t* a0h = xh + jp * kTile * kp;
    const uint16_t* a0l = xl + jp * kTile * kp;
    // W_lo of a step: stored (wl), none (bf16 weights), or rebuilt from nibbles (wn) into
    // lo.steps[s] by the first token-tile pair, for itself and the others. The first pair
    // rebuilds step s + 1 in two halves between step s's tile products, where the vector work
    // runs while the tiles multiply; rebuilt just before its own products it added its whole
    // time (this matters most for a 32-token call, which has one pair; bench/NOTES.md). Step 0
    // is rebuilt likewise during the previous block's last step (lo.step0), and this block's
    // last step rebuilds the next block's.
    const bool rebuild = wn != nullptr && jp == 0;
    const bool last_pair = jp + 2 >= tp / kTile;
    if (rebuild && lo.step0 == nullptr) DecodeLo(wh, wn, lo.steps, 0, 16);
    for (int64_t s = 0; s < ns; ++s) {
      const uint16_t* w_lo = wl != nullptr ? wl + s * 1024 : nullptr;
      if (wn != nullptr) w_lo = s == 0 && lo.step0 != nullptr ? lo.step0 : lo.steps + s * 1024;
      const bool ahead = rebuild && s + 1 < ns;
      const bool next_block = !ahead && last_pair && s + 1 == ns && lo.next_nib != nullptr;
      const uint16_t* rb_hi = ahead ? wh + (s + 1) * 1024 : lo.next_hi;
      const uint8_t* rb_nib = ahead ? wn + (s + 1) * 512 : lo.next_nib;
      uint16_t* rb_out = ahead ? lo.steps + (s + 1) * 1024 : lo.next_out;
      // C[j][i] += X_lo[j]·W_hi[i] + X_hi[j]·W_hi[i] (+ X_hi[j]·W_lo[i]): 8 loads, 12 products
      // for a pair of token tiles.
      _tile_loadd(6, wh + s * 1024, 64);
      _tile_loadd(7, wh + s * 1024 + 512, 64);
      _tile_loadd(4, a0l + s * kKStep, xs);
      if (!single) _tile_loadd(5, a0l + kTile * kp + s * kKStep, xs);
      Products(single);
      if (ahead || next_block) DecodeLo(rb_hi, rb_nib, rb_out, 0, 8);
      _tile_loadd(4, a0h + s * kKStep, xs);
      if (!single) _tile_loadd(5, a0h + kTile * kp + s * kKStep, xs);
      Products(single);
      if (ahead || next_block) DecodeLo(rb_hi, rb_nib, rb_out, 8, 16);
      if (w_lo != nullptr) {
        _tile_loadd(6, w_lo, 64);
        _tile_loadd(7, w_lo + 512, 64);
        Products(single);
      }
    }
    for (int idx = 0; idx < (single ? 2 : 4); ++idx) {
      const int64_t j = idx / 2, i = idx % 2;
      const int64_t tt = t0 + (jp + j) * kTile, rb = r0 + i * kTile;
      const int64_t n_t = std::min<int64_t>(kTile, n_tokens - tt);
      const int64_t n_r = std::min<int64_t>(kTile, r1 - rb);
      if (last && n_t == kTile && n_r == kTile) {
        StoreTile(idx, y + tt * y_stride + rb, y_stride * 4);
        continue;
      }
      StoreTile(idx, c + idx * 256, 64);
      if (!last || n_t <= 0 || n_r <= 0) continue;
      for (int64_t m = 0; m < n_t; ++m)
        std::memcpy(y + (tt + m) * y_stride + rb, c + idx * 256 + m * 16, n_r * 4);
    }
  }
}

// ys[i] = ws[i] · x for 1..kMaxShared pre-split matrices of one width: the activations are
// split once per pass (per thread up to 64 tokens) and one parallel region covers all the
// matrices' row blocks (Q/K/V, or gate/up, in one call: fewer splits and hand-offs).
constexpr int kMaxShared = 4;
void MatMulAmxPacked(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tokens, ThreadPool* pool, int64_t max_tp) {
  TARMAC_CHECK(n >= 1 && n <= kMaxShared);
  const int64_t K = ws[0]->cols;
  const int64_t steps = (K + kKStep - 1) / kKStep;
  const int64_t kp = steps * kKStep;
  const AmxPackedMatrix* ps[kMaxShared];
  int64_t first[kMaxShared + 1] = {0};  // global index of each matrix's first row block
  for (int i = 0; i < n; ++i) {
    ps[i] = PreparedAs<AmxPackedMatrix>(*ws[i]);
    TARMAC_CHECK(ps[i] != nullptr && ps[i]->Matches(*ws[i]) && ws[i]->cols == K);
    first[i + 1] = first[i] + (ws[i]->rows + kRowBlock - 1) / kRowBlock;
  }
  const int64_t n_blocks = first[n];
  const bool threaded = pool != nullptr && pool->num_threads() > 1;
  thread_local AlignedBuffer x_store, c_store;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += max_tp) {
    // Whole token tiles (16): an odd last tile runs on its own in ComputeBlockPacked.
    const int64_t tp = std::min(max_tp, (n_tokens - t0 + kTile - 1) / kTile * kTile);
    // K chunks keep the pass's activations of one chunk (tp × chunk × 4 bytes) in L2.
    const int64_t kc_steps = std::max<int64_t>(
        256 / kKStep, std::min<int64_t>(steps, (int64_t{512} << 10) / (4 * tp * kKStep) / 8 * 8));
    // Every thread reads all of the pass's activations. Up to 64 tokens each thread splits
    // its own copy of the chunk: that costs little and saves a hand-off and moving the other
    // thread's half between cores (with one shared copy, 2 threads could take longer than 1;
    // bench/NOTES.md). Beyond that the split is shared.
    const bool own_split = threaded && tp <= 64;
    uint16_t* xh = nullptr;
    uint16_t* xl = nullptr;
    if (!own_split) {
      const size_t x_elems = static_cast<size_t>(tp * kp);
      if (x_store.size() < 2 * x_elems * 2) x_store.Resize(2 * x_elems * 2);
      xh = x_store.as<uint16_t>();
      xl = xh + x_elems;
      auto split = [&](int64_t b, int64_t e, int) {
        SplitActivationRows(x, K, 0, kp, kp, n_tokens, t0, b * kTile, e * kTile, xh, xl);
      };
      if (threaded) {
        pool->ParallelFor(tp / kTile, 1, split);
      } else {
        split(0, tp / kTile, 0);
      }
    }
    const size_t c_block = static_cast<size_t>(kRowBlock * tp);
    if (c_store.size() < n_blocks * c_block * 4) c_store.Resize(n_blocks * c_block * 4);
    float* cacc = c_store.as<float>();
    for (int64_t s0 = 0; s0 < steps; s0 += kc_steps) {
      const int64_t ns = std::min(kc_steps, steps - s0);
      auto run = [&](int64_t blk0, int64_t blk1, int) {
        const uint16_t* ah = own_split ? nullptr : xh + s0 * kKStep;
        const uint16_t* al = own_split ? nullptr : xl + s0 * kKStep;
        int64_t stride = kp;
        if (own_split) {
          thread_local AlignedBuffer own;
          const size_t elems = static_cast<size_t>(tp * ns * kKStep);
          if (own.size() < 2 * elems * 2) own.Resize(2 * elems * 2);
          uint16_t* oh = own.as<uint16_t>();
          stride = ns * kKStep;
          SplitActivationRows(x, K, s0 * kKStep, stride, stride, n_tokens, t0, 0, tp, oh,
                              oh + elems);
          ah = oh;
          al = oh + elems;
        }
        // A row block's rebuilt W_lo (2 KiB per step), then two step-0 slots that alternate
        // between consecutive blocks (one rebuilt ahead while the other is in use).
        thread_local AlignedBuffer lo_stage;
        if (lo_stage.size() < static_cast<size_t>((ns + 2) * 2048))
          lo_stage.Resize((ns + 2) * 2048);
        uint16_t* const steps_buf = lo_stage.as<uint16_t>();
        AmxConfigureTiles();
        const uint16_t* step0 = nullptr;
        int i = 0;
        for (int64_t gblk = blk0; gblk < blk1; ++gblk) {
          while (gblk >= first[i + 1]) ++i;
          const MatrixView& w = *ws[i];
          const int64_t blk = gblk - first[i];
          const int64_t r0 = blk * kRowBlock, r1 = std::min(w.rows, r0 + kRowBlock);
          const AmxPackedMatrix::Lo kind = ps[i]->lo_kind();
          LoStage lo{steps_buf, kind == AmxPackedMatrix::Lo::kNibble ? step0 : nullptr};
          if (gblk + 1 < blk1) {
            int j = i;
            while (gblk + 1 >= first[j + 1]) ++j;
            if (ps[j]->lo_kind() == AmxPackedMatrix::Lo::kNibble) {
              const int64_t nb = gblk + 1 - first[j];
              lo.next_hi = ps[j]->hi(nb) + s0 * 1024;
              lo.next_nib = ps[j]->nibbles(nb) + s0 * 512;
              lo.next_out = steps_buf + (ns + ((gblk + 1) & 1)) * 1024;
            }
          }
          ComputeBlockPacked(
              ah, al, stride, ps[i]->hi(blk) + s0 * 1024,
              kind == AmxPackedMatrix::Lo::kBf16 ? ps[i]->lo(blk) + s0 * 1024 : nullptr,
              kind == AmxPackedMatrix::Lo::kNibble ? ps[i]->nibbles(blk) + s0 * 512 : nullptr,
              lo, ns, s0 == 0, s0 + ns == steps, tp, t0, n_tokens, r0, r1, ys[i], w.rows,
              cacc + gblk * c_block);
          step0 = lo.next_out;
        }
        AmxReleaseTiles();
      };
      // One chunk of row blocks per thread: each chunk splits (own_split) and configures the
      // tiles once.
      if (threaded && n_blocks > 1) {
        pool->ParallelFor(n_blocks, (n_blocks + pool->num_threads() - 1) / pool->num_threads(),
                          run);
      } else {
        run(0, n_blocks, 0);
      }
    }
  }
}

}  // namespace

bool CanShareMatMulAmx(const MatrixView* const* ws, int n) {
  if (n < 1 || n > kMaxShared || !AmxEnabled()) return false;
  for (int i = 0; i < n; ++i) {
    const MatrixView& w = *ws[i];
    const AmxPackedMatrix* p = PreparedAs<AmxPackedMatrix>(w);
    if (p == nullptr || !IsMatVecType(w.type) || IsInt8MatMulType(w.type) ||
        w.rows == 0 || w.cols == 0 || w.cols != ws[0]->cols || !p->Matches(w)) {
      return false;
    }
  }
  return true;
}

void MatMulAmxShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                     int64_t n_tokens, ThreadPool* pool) {
  TARMAC_CHECK(CanShareMatMulAmx(ws, n) && n_tokens >= 1);
  MatMulAmxPacked(ws, ys, n, x, n_tokens, pool, MaxPassTokens(ws[0]->cols));
}

namespace amx_internal {
void MatMulAmxPackedOne(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                        ThreadPool* pool) {
  const MatrixView* ws[1] = {&w};
  float* ys[1] = {y};
  MatMulAmxPacked(ws, ys, 1, x, n_tokens, pool, MaxPassTokens(w.cols));
}
}  // namespace amx_internal

}  // namespace tarmac::kernels
