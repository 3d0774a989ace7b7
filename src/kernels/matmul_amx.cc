// AMX-BF16 GEMM with split-bf16 operands (see matmul_amx.h).
//
// Only the functions marked TARMAC_AMX are compiled for AMX/AVX-512; they run only after
// AmxBf16Available() said yes. They use intrinsics and raw pointers only, so no inline
// function from a header gets instantiated with those instructions (which the linker could
// then pick for callers on other CPUs).

#include "kernels/matmul_amx.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cpuid.h>
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "kernels/amx_split-inl.h"
#include "kernels/dequant.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_amx_internal.h"
#include "kernels/matvec.h"
#include "tensor/aligned_buffer.h"

namespace tarmac::kernels {
namespace {

#define TARMAC_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

constexpr int64_t kKStep = 32;   // k per tile (16 bf16 pairs)
constexpr int64_t kTile = 16;    // rows / tokens per tile
constexpr int64_t kRowBlock = 32;  // weight rows per task: 2 A tiles
static_assert(kKStep == amx_internal::kKStep && kRowBlock == amx_internal::kRowBlock);
constexpr int64_t kTokPair = 32;   // tokens per pass: 2 B tiles

// Tile configuration (palette 1): tiles 0-3 C (f32 16×16), 4-5 A, 6-7 B (16 rows × 64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// v (f32, 32 values of which `valid` are real, the rest read as 0) -> hi + lo, both bf16,
// hi = RNE(v), lo = RNE(v - hi) (v - hi is exact in f32).
TARMAC_AMX inline void Split32(const float* v, int64_t valid, uint16_t* hi, uint16_t* lo) {
  const __mmask16 m0 = valid >= 16 ? 0xFFFF : (valid <= 0 ? 0 : (1u << valid) - 1);
  const int64_t v1 = valid - 16;
  const __mmask16 m1 = v1 >= 16 ? 0xFFFF : (v1 <= 0 ? 0 : (1u << v1) - 1);
  SplitBf16x32(_mm512_maskz_loadu_ps(m0, v), _mm512_maskz_loadu_ps(m1, v + 16), hi, lo);
}

// B tiles for tokens [t0, t0 + tp) (tp a multiple of 32; tokens >= n_tokens are zero):
// b_hi/b_lo[j][s] is a 1 KiB tile, row kk = 16 tokens × (k = s·32 + 2kk, s·32 + 2kk + 1).
// Token tiles [j_begin, j_end) only (threads split the tiles). Row-major split per token into
// a 2 KiB scratch, then each tile row gathered from 16 tokens.
TARMAC_AMX void StageActivations(const float* x, int64_t K, int64_t n_tokens, int64_t t0,
                                 int64_t j_begin, int64_t j_end, int64_t steps, uint32_t* b_hi,
                                 uint32_t* b_lo) {
  alignas(64) uint32_t th[256], tl[256];  // [16 tokens][16 pairs]
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(16));
  for (int64_t j = j_begin; j < j_end; ++j) {
    for (int64_t s = 0; s < steps; ++s) {
      for (int64_t n = 0; n < kTile; ++n) {
        const int64_t t = t0 + j * kTile + n;
        const int64_t valid = t < n_tokens ? std::min<int64_t>(kKStep, K - s * kKStep) : 0;
        Split32(x + t * K + s * kKStep, valid, reinterpret_cast<uint16_t*>(th + n * 16),
                reinterpret_cast<uint16_t*>(tl + n * 16));
      }
      uint32_t* dh = b_hi + (j * steps + s) * 256;
      uint32_t* dl = b_lo + (j * steps + s) * 256;
      for (int64_t kk = 0; kk < 16; ++kk) {
        _mm512_storeu_si512(dh + kk * 16, _mm512_i32gather_epi32(idx, th + kk, 4));
        _mm512_storeu_si512(dl + kk * 16, _mm512_i32gather_epi32(idx, tl + kk, 4));
      }
    }
  }
}

// A tiles for weight rows [r0, r0 + 32) and k in [k0, k0 + steps·32) ∩ [0, K):
// a_hi/a_lo[s][i][m][32] (rows >= r1 and k >= K are zero). k0 is a multiple of the dtype's
// block size. row: scratch of steps·32 floats.
TARMAC_AMX void StageWeights(const MatrixView& w, int64_t r0, int64_t r1, int64_t k0,
                             int64_t steps, uint16_t* a_hi, uint16_t* a_lo, float* row) {
  const int64_t n = std::min(w.cols - k0, steps * kKStep);
  const int64_t k0_bytes = RowBytes(w.type, k0);
  const int64_t n_bytes = RowBytes(w.type, n);
  for (int64_t rr = 0; rr < kRowBlock; ++rr) {
    const int64_t r = r0 + rr;
    const int64_t i = rr / kTile, m = rr % kTile;
    // The same chunk of the next row block (this thread's next, see MatMulAmx) into L2: the
    // loads below stall on DRAM otherwise (~4 GB/s a thread), the rows are separate streams
    // and the hardware prefetchers stop at page boundaries.
    if (r + kRowBlock < w.rows) {
      const char* next = reinterpret_cast<const char*>(w.row(r + kRowBlock)) + k0_bytes;
      for (int64_t c = 0; c < n_bytes; c += 64) _mm_prefetch(next + c, _MM_HINT_T1);
    }
    // f32 source of this row's chunk: the row itself (F32), converted here 32 at a time
    // (F16, BF16: exact), or dequantized into `row` (other dtypes).
    const uint8_t* src = r < r1 ? static_cast<const uint8_t*>(w.row(r)) + k0_bytes : nullptr;
    const float* f = reinterpret_cast<const float*>(src);
    if (src != nullptr && w.type != DType::kF32 && w.type != DType::kF16 &&
        w.type != DType::kBF16) {
      DequantizeRow(w.type, src, row, n);
      f = row;
    }
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t valid = r < r1 ? std::min<int64_t>(kKStep, n - s * kKStep) : 0;
      const int64_t off = ((s * 2 + i) * kTile + m) * kKStep;
      if (valid > 0 && (w.type == DType::kF16 || w.type == DType::kBF16)) {
        // Exact splits straight from the 16-bit values: a BF16 weight is its own hi (lo is
        // never read: w_lo is false); an F16 weight's f32 with the low 16 bits cleared is a
        // bf16 (its top 8 significant bits), and the other 3 bits, v - hi, are one too.
        const __mmask32 mask = valid >= 32 ? ~__mmask32{0} : (__mmask32{1} << valid) - 1;
        const __m512i h =
            _mm512_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(src) + s * kKStep);
        if (w.type == DType::kBF16) {
          _mm512_storeu_si512(a_hi + off, h);
          continue;
        }
        const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
        const __m512 a = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
        const __m512 b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
        const __m512 ha = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), top));
        const __m512 hb = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(b), top));
        const __m512bh vh = _mm512_cvtne2ps_pbh(hb, ha);  // exact: the low halves are zero
        const __m512bh vl = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha));
        _mm512_storeu_si512(a_hi + off, reinterpret_cast<const __m512i&>(vh));
        _mm512_storeu_si512(a_lo + off, reinterpret_cast<const __m512i&>(vl));
      } else {
        Split32(valid > 0 ? f + s * kKStep : row, valid, a_hi + off, a_lo + off);
      }
    }
  }
}

// The 2×2 block both kernels accumulate: C tiles 0-3 += A tiles 4-5 times B tiles 6-7,
// tile 0 = (A4, B6), 1 = (A4, B7), 2 = (A5, B6), 3 = (A5, B7).
TARMAC_AMX inline void Products2x2() {
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

// Only the A-tile-4 half (C tiles 0 and 1) when `single`.
TARMAC_AMX inline void Products(bool single) {
  if (single) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
  } else {
    Products2x2();
  }
}

// C tiles 0-1 start at zero (first K chunk) or from the 1 KiB tiles c0, c1.
TARMAC_AMX inline void StartC2(bool first, const float* c0, const float* c1) {
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
  } else {
    _tile_loadd(0, c0, 64);
    _tile_loadd(1, c1, 64);
  }
}

// C tiles 0-3 start at zero (first K chunk) or from the 1 KiB tiles c0..c3.
TARMAC_AMX inline void StartC(bool first, const float* c0, const float* c1, const float* c2,
                              const float* c3) {
  StartC2(first, c0, c1);
  if (first) {
    _tile_zero(2);
    _tile_zero(3);
  } else {
    _tile_loadd(2, c2, 64);
    _tile_loadd(3, c3, 64);
  }
}

// One row block (rows [r0, r1), A staged for steps [s0, s0 + ns)) times all token tiles of
// the pass. C lives in tiles over the chunk; between K chunks it is kept in cacc (this row
// block's [token tile][i][16][16] f32). first: start from zero; last: write y (transposed).
TARMAC_AMX void ComputeBlock(const uint16_t* a_hi, const uint16_t* a_lo, const uint32_t* b_hi,
                             const uint32_t* b_lo, int64_t steps, int64_t s0, int64_t ns,
                             bool w_lo, bool first, bool last, int64_t tp, int64_t t0,
                             int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                             int64_t y_stride, float* cacc) {
  constexpr int64_t kA = kTile * kKStep;  // u16 per A tile
  const __m512i col = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(16));
  for (int64_t jp = 0; jp < tp / kTile; jp += 2) {
    float* c = cacc + jp * 2 * 256;  // tiles (jp, i=0), (jp, 1), (jp+1, 0), (jp+1, 1)
    StartC(first, c, c + 512, c + 256, c + 768);
    const uint32_t* bh0 = b_hi + (jp * steps + s0) * 256;
    const uint32_t* bh1 = b_hi + ((jp + 1) * steps + s0) * 256;
    const uint32_t* bl0 = b_lo + (jp * steps + s0) * 256;
    const uint32_t* bl1 = b_lo + ((jp + 1) * steps + s0) * 256;
    for (int64_t s = 0; s < ns; ++s) {
      // C[i][j] += A_lo[i]·B_hi[j] + A_hi[i]·B_hi[j] + A_hi[i]·B_lo[j], ordered so that 8 tile
      // loads serve the 12 products; tile 0 = (i0, j0), 1 = (i0, j1), 2 = (i1, j0), 3 = (i1, j1).
      _tile_loadd(6, bh0 + s * 256, 64);
      _tile_loadd(7, bh1 + s * 256, 64);
      if (w_lo) {
        _tile_loadd(4, a_lo + (s * 2) * kA, 64);
        _tile_loadd(5, a_lo + (s * 2 + 1) * kA, 64);
        Products2x2();
      }
      _tile_loadd(4, a_hi + (s * 2) * kA, 64);
      _tile_loadd(5, a_hi + (s * 2 + 1) * kA, 64);
      Products2x2();
      _tile_loadd(6, bl0 + s * 256, 64);
      _tile_loadd(7, bl1 + s * 256, 64);
      Products2x2();
    }
    // c[(j·2 + i)·256 + m·16 + n]: weight row r0 + 16i + m, token t0 + 16(jp + j) + n.
    _tile_stored(0, c, 64);
    _tile_stored(1, c + 512, 64);
    _tile_stored(2, c + 256, 64);
    _tile_stored(3, c + 768, 64);
    if (!last) continue;
    for (int64_t i = 0; i < 2; ++i) {
      const int64_t rb = r0 + i * kTile;
      if (rb >= r1) break;
      const int64_t rows = std::min<int64_t>(kTile, r1 - rb);
      const __mmask16 mask = rows >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << rows) - 1);
      for (int64_t j = 0; j < 2; ++j) {
        const float* ct = c + (j * 2 + i) * 256;
        for (int64_t n = 0; n < kTile; ++n) {
          const int64_t t = t0 + (jp + j) * kTile + n;
          if (t >= n_tokens) break;
          _mm512_mask_storeu_ps(y + t * y_stride + rb, mask, _mm512_i32gather_ps(col, ct + n, 4));
        }
      }
    }
  }
}

// ---- The pre-split path: roles swapped. With the weights split and transposed into the
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

// 16×16 u32 transpose of each of `tiles` 1 KiB tiles in place (row-major weight rows ×
// k pairs -> k pairs × weight rows, AMX's B layout). Done once per matrix, at Pack.
TARMAC_AMX void TransposeTiles(uint32_t* t, int64_t tiles) {
  const __m512i idx = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(16));
  alignas(64) uint32_t tmp[256];
  for (int64_t i = 0; i < tiles; ++i) {
    uint32_t* tile = t + i * 256;
    for (int kk = 0; kk < 16; ++kk)
      _mm512_store_si512(tmp + kk * 16, _mm512_i32gather_epi32(idx, tile + kk, 4));
    std::memcpy(tile, tmp, sizeof(tmp));
  }
}

TARMAC_AMX inline void StoreTile(int idx, float* p, int64_t stride_bytes) {
  switch (idx) {
    case 0: _tile_stored(0, p, stride_bytes); break;
    case 1: _tile_stored(1, p, stride_bytes); break;
    case 2: _tile_stored(2, p, stride_bytes); break;
    default: _tile_stored(3, p, stride_bytes); break;
  }
}

// Nibble-coded lo of one K step (AmxPackedMatrix, kNibble) -> its 1024 bf16, hi's order:
// lo = ±n·2^(e-10) rebuilt from hi's sign and exponent bits (hi & 0xFF80) plus, per n, the
// exponent offset and mantissa of n as a bf16 (n = 1: 2^-10; 2, 3: 2^-9 · 1.0, 1.5; 4-7:
// 2^-8 · 1.0, 1.25, 1.5, 1.75); n = 0 gives +0. hi's exponent is at least 103 (f16's
// smallest subnormal), so the offset never borrows from the sign.
TARMAC_AMX inline void DecodeLo(const uint16_t* hi, const uint8_t* nib, uint16_t* lo) {
  const __m512i table = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         0, 0, 0, 0, 0, -928, -960, -992, -1024, -1088, -1152,
                                         -1280, 0);
  const __m512i sign_exp = _mm512_set1_epi16(static_cast<int16_t>(0xFF80));
  const __m512i low4 = _mm512_set1_epi16(0x0F);
  for (int g = 0; g < 16; ++g) {
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

// One row block (pre-split weights wh/wl for steps [s0, s0 + ns)) times every token tile of
// the pass (xh/xl: the same K chunk of the split activations, rows kp elements apart). cacc: this row block's C between K chunks,
// [token pair][4 tiles][16][16]. (A software prefetch of the next row block's weights
// measured no different: the hardware streams the sequential tiles.)
TARMAC_AMX void ComputeBlockPacked(const uint16_t* xh, const uint16_t* xl, int64_t kp,
                                   const uint16_t* wh, const uint16_t* wl, const uint8_t* wn,
                                   uint16_t* lo_stage, int64_t ns, bool first, bool last, int64_t tp,
                                   int64_t t0, int64_t n_tokens, int64_t r0, int64_t r1,
                                   float* y, int64_t y_stride, float* cacc) {
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
    for (int64_t s = 0; s < ns; ++s) {
      // W_lo of this step: stored (wl), none (bf16 weights), or rebuilt from nibbles (wn) into
      // lo_stage[s] by the first token-tile pair for the others.
      const uint16_t* w_lo = wl != nullptr ? wl + s * 1024 : nullptr;
      if (wn != nullptr) {
        if (jp == 0) DecodeLo(wh + s * 1024, wn + s * 512, lo_stage + s * 1024);
        w_lo = lo_stage + s * 1024;
      }
      // C[j][i] += X_lo[j]·W_hi[i] + X_hi[j]·W_hi[i] (+ X_hi[j]·W_lo[i]): 8 loads, 12 products
      // for a pair of token tiles.
      _tile_loadd(6, wh + s * 1024, 64);
      _tile_loadd(7, wh + s * 1024 + 512, 64);
      _tile_loadd(4, a0l + s * kKStep, xs);
      if (!single) _tile_loadd(5, a0l + kTile * kp + s * kKStep, xs);
      Products(single);
      _tile_loadd(4, a0h + s * kKStep, xs);
      if (!single) _tile_loadd(5, a0h + kTile * kp + s * kKStep, xs);
      Products(single);
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

// Tiles 0-7 with the given rows and bytes per row (palette 1).
TARMAC_AMX void LoadTileConfig(const uint8_t* rows, const uint16_t* colsb) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = rows[t];
    cfg.colsb[t] = colsb[t];
  }
  // GCC 12's _tile_loadconfig does not tell the optimizer it reads all 64 bytes, so without
  // this barrier the rows/colsb stores above are dropped as dead.
  __asm__ volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

// All 8 tiles 16 rows × 64 bytes: what every kernel in this file uses.
void LoadTileConfig() {
  static constexpr uint8_t kRows[8] = {16, 16, 16, 16, 16, 16, 16, 16};
  static constexpr uint16_t kColsb[8] = {64, 64, 64, 64, 64, 64, 64, 64};
  LoadTileConfig(kRows, kColsb);
}

TARMAC_AMX void SplitRowsImpl(const float* src, int64_t n, uint16_t* hi, uint16_t* lo) {
  for (int64_t i = 0; i < n; i += 32) Split32(src + i, 32, hi + i, lo + i);
}

TARMAC_AMX void ReleaseTiles() { _tile_release(); }

bool ProbeAmx() {
  unsigned a, b, c, d;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const bool tile = (d >> 24) & 1, amx_bf16 = (d >> 22) & 1, avx512f = (b >> 16) & 1,
             avx512bw = (b >> 30) & 1, avx512dq = (b >> 17) & 1, avx512vl = (b >> 31) & 1;
  if (!(tile && amx_bf16 && avx512f && avx512bw && avx512dq && avx512vl)) return false;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) == 0 || !((a >> 5) & 1)) return false;  // bf16
  // OS support: XCR0 must enable AVX-512 state (bits 5-7) and AMX (17-18), and the kernel
  // must grant this process the tile data (ARCH_REQ_XCOMP_PERM = 0x1023, XTILEDATA = 18).
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  if ((xcr0 & 0xE6) != 0xE6 || ((xcr0 >> 17) & 3) != 3) return false;
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

std::atomic<int> g_enabled{-1};  // -1: from the environment on first use

}  // namespace

void AmxConfigureTiles() { LoadTileConfig(); }
void AmxConfigureTiles(const uint8_t rows[8], const uint16_t colsb[8]) {
  LoadTileConfig(rows, colsb);
}

void AmxSplitRows(const float* src, int64_t n, uint16_t* hi, uint16_t* lo) {
  TARMAC_DCHECK(n % 32 == 0);
  SplitRowsImpl(src, n, hi, lo);
}
void AmxReleaseTiles() { ReleaseTiles(); }

bool AmxBf16Available() {
  static const bool available = ProbeAmx();
  return available;
}

bool AmxEnabled() {
  int e = g_enabled.load(std::memory_order_relaxed);
  if (e < 0) {
    const char* env = std::getenv("TARMAC_NO_AMX");
    e = (env != nullptr && std::strcmp(env, "0") != 0 && env[0] != '\0') ? 0 : 1;
    g_enabled.store(e, std::memory_order_relaxed);
  }
  return e == 1 && AmxBf16Available();
}

void SetAmxEnabled(bool on) { g_enabled.store(on ? 1 : 0, std::memory_order_relaxed); }

namespace amx_internal {
void StageWeightBlock(const MatrixView& w, int64_t r0, int64_t r1, int64_t steps, uint16_t* hi,
                      uint16_t* lo, float* row) {
  StageWeights(w, r0, r1, 0, steps, hi, lo, row);
}
void TransposeWeightTiles(uint32_t* t, int64_t tiles) { TransposeTiles(t, tiles); }
}  // namespace amx_internal


namespace {

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
    ps[i] = static_cast<const AmxPackedMatrix*>(ws[i]->packed);
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
    // thread's half between cores (wp-11m's 384×384 at 32 tokens: 2 threads took longer than
    // 1 with one shared copy). Beyond that the split is shared.
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
        thread_local AlignedBuffer lo_stage;  // a row block's rebuilt W_lo, 2 KiB per step
        if (lo_stage.size() < static_cast<size_t>(ns * 2048)) lo_stage.Resize(ns * 2048);
        LoadTileConfig();
        int i = 0;
        for (int64_t gblk = blk0; gblk < blk1; ++gblk) {
          while (gblk >= first[i + 1]) ++i;
          const MatrixView& w = *ws[i];
          const int64_t blk = gblk - first[i];
          const int64_t r0 = blk * kRowBlock, r1 = std::min(w.rows, r0 + kRowBlock);
          const AmxPackedMatrix::Lo lo = ps[i]->lo_kind();
          ComputeBlockPacked(
              ah, al, stride, ps[i]->hi(blk) + s0 * 1024,
              lo == AmxPackedMatrix::Lo::kBf16 ? ps[i]->lo(blk) + s0 * 1024 : nullptr,
              lo == AmxPackedMatrix::Lo::kNibble ? ps[i]->nibbles(blk) + s0 * 512 : nullptr,
              lo_stage.as<uint16_t>(), ns, s0 == 0, s0 + ns == steps, tp, t0, n_tokens, r0, r1,
              ys[i], w.rows, cacc + gblk * c_block);
        }
        ReleaseTiles();
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

// Tokens per pass: all of them while the staged activations stay under ~32 MiB (4 bytes per
// token and k), so each weight row is converted once per call in the common cases.
int64_t MaxPassTokens(int64_t K) {
  const int64_t kp = (K + kKStep - 1) / kKStep * kKStep;
  return std::max<int64_t>(kTokPair, (int64_t{32} << 20) / (4 * kp) / kTokPair * kTokPair);
}

}  // namespace

bool CanShareMatMulAmx(const MatrixView* const* ws, int n) {
  if (n < 1 || n > kMaxShared || !AmxEnabled()) return false;
  for (int i = 0; i < n; ++i) {
    const MatrixView& w = *ws[i];
    if (w.packed == nullptr || !IsMatVecType(w.type) || IsInt8MatMulType(w.type) ||
        w.rows == 0 || w.cols == 0 || w.cols != ws[0]->cols ||
        !static_cast<const AmxPackedMatrix*>(w.packed)->Matches(w)) {
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

void MatMulAmx(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
               ThreadPool* pool) {
  TARMAC_CHECK(AmxBf16Available());
  TARMAC_CHECK(IsMatVecType(w.type));
  TARMAC_CHECK(n_tokens >= 1 && w.rows >= 0 && w.cols >= 0);
  if (w.rows == 0) return;
  const int64_t K = w.cols;
  if (K == 0) {
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
  const int64_t steps = (K + kKStep - 1) / kKStep;
  const int64_t kp = steps * kKStep;
  const int64_t max_tp = MaxPassTokens(K);
  const bool w_lo = w.type != DType::kBF16;  // bf16 weights are exactly their hi part
  // The pre-split copy (whenever there is one: MatMul sends 7+ tokens here) beats splitting
  // per call at every size measured: wp-11m's layer matmuls at 32 tokens 2.09 vs 2.65 ms
  // (BM_Wp11mStep), at 64 tokens ~4% in the engine.
  const auto* packed = static_cast<const AmxPackedMatrix*>(w.packed);
  TARMAC_CHECK(packed == nullptr || packed->Matches(w));
  if (packed != nullptr) {
    const MatrixView* ws[1] = {&w};
    float* ys[1] = {y};
    MatMulAmxPacked(ws, ys, 1, x, n_tokens, pool, max_tp);
    return;
  }
  const int64_t n_blocks = (w.rows + kRowBlock - 1) / kRowBlock;
  // K chunks: a chunk of B (all tokens of the pass) stays in L2 and a row block's A chunk in
  // L1 while every row block streams past it. A multiple of every dtype's block size (256).
  thread_local AlignedBuffer b_store, c_store;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += max_tp) {
    const int64_t tp = std::min(max_tp, (n_tokens - t0 + kTokPair - 1) / kTokPair * kTokPair);
    const int64_t kc_steps = std::max<int64_t>(
        256 / kKStep, std::min<int64_t>(steps, (int64_t{512} << 10) / (4 * tp * kKStep) / 8 * 8));
    const size_t b_words = static_cast<size_t>(tp * kp / 2);  // u32 per hi (or lo) copy
    if (b_store.size() < 2 * b_words * 4) b_store.Resize(2 * b_words * 4);
    uint32_t* b_hi = b_store.as<uint32_t>();
    uint32_t* b_lo = b_hi + b_words;
    auto stage = [&](int64_t j0, int64_t j1, int) {
      StageActivations(x, K, n_tokens, t0, j0, j1, steps, b_hi, b_lo);
    };
    if (pool != nullptr && pool->num_threads() > 1) {
      pool->ParallelFor(tp / kTile, 1, stage);
    } else {
      stage(0, tp / kTile, 0);
    }
    const size_t c_block = static_cast<size_t>(kRowBlock * tp);  // floats per row block
    if (c_store.size() < n_blocks * c_block * 4) c_store.Resize(n_blocks * c_block * 4);
    float* cacc = c_store.as<float>();
    for (int64_t s0 = 0; s0 < steps; s0 += kc_steps) {
      const int64_t ns = std::min(kc_steps, steps - s0);
      auto run = [&](int64_t blk0, int64_t blk1, int) {
        thread_local AlignedBuffer a_store;
        const size_t a_elems = static_cast<size_t>(kRowBlock * kc_steps * kKStep);
        const size_t need = 2 * a_elems * 2 + kc_steps * kKStep * 4;
        if (a_store.size() < need) a_store.Resize(need);
        uint16_t* a_hi = a_store.as<uint16_t>();
        uint16_t* a_lo = a_hi + a_elems;
        float* row = reinterpret_cast<float*>(a_lo + a_elems);
        LoadTileConfig();
        for (int64_t blk = blk0; blk < blk1; ++blk) {
          const int64_t r0 = blk * kRowBlock, r1 = std::min(w.rows, r0 + kRowBlock);
          StageWeights(w, r0, r1, s0 * kKStep, ns, a_hi, a_lo, row);
          ComputeBlock(a_hi, a_lo, b_hi, b_lo, steps, s0, ns, w_lo, s0 == 0, s0 + ns == steps,
                       tp, t0, n_tokens, r0, r1, y, w.rows, cacc + blk * c_block);
        }
        ReleaseTiles();
      };
      // One contiguous range of row blocks per thread: StageWeights prefetches the next one.
      if (pool == nullptr || pool->num_threads() == 1 || n_blocks == 1) {
        run(0, n_blocks, 0);
      } else {
        pool->ParallelFor(n_blocks, (n_blocks + pool->num_threads() - 1) / pool->num_threads(),
                          run);
      }
    }
  }
}

}  // namespace tarmac::kernels
