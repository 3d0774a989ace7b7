// AMX-BF16 GEMM with split-bf16 operands (see matmul_amx.h): weights split per call, the AMX
// probe and switches; the pre-split path is in matmul_amx_packed.cc.
//
// Only the functions marked TARMAC_AMX are compiled for AMX/AVX-512; they run only after
// AmxBf16Available() said yes. They use intrinsics and raw pointers only, and the tile helpers
// they share with matmul_amx_packed.cc (matmul_amx_tiles-inl.h) have internal linkage, so no
// inline function the linker could pick for callers on other CPUs gets instantiated with
// those instructions.

#include "kernels/matmul_amx.h"

#include "kernels/x86_intrinsics.h"  // <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/check.h"
#include "kernels/cpu_features.h"
#include "kernels/dequant.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_amx_internal.h"
#include "kernels/matmul_amx_tiles-inl.h"
#include "kernels/matvec.h"
#include "tensor/aligned_buffer.h"

namespace tarmac::kernels {
namespace {

// Tile configuration (palette 1): tiles 0-3 C (f32 16×16), 4-5 A, 6-7 B (16 rows × 64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

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
    // loads below stall on DRAM otherwise (bench/NOTES.md), the rows are separate streams and
    // the hardware prefetchers stop at page boundaries.
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

bool AmxBf16Available() { return CpuSupports(Isa::kAmx); }

bool AmxEnabled() { return IsaAtLeast(Isa::kAmx); }

namespace amx_internal {
void StageWeightBlock(const MatrixView& w, int64_t r0, int64_t r1, int64_t steps, uint16_t* hi,
                      uint16_t* lo, float* row) {
  StageWeights(w, r0, r1, 0, steps, hi, lo, row);
}
void TransposeWeightTiles(uint32_t* t, int64_t tiles) { TransposeTiles(t, tiles); }
}  // namespace amx_internal


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
  // per call at every size measured (bench/NOTES.md).
  const AmxPackedMatrix* packed = PreparedAs<AmxPackedMatrix>(w);
  TARMAC_CHECK(packed == nullptr || packed->Matches(w));
  if (packed != nullptr) {
    amx_internal::MatMulAmxPackedOne(w, x, n_tokens, y, pool);
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
