// SIMD MatMul (see matmul.h for the blocking scheme).

#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <utility>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/dequant.h"
#include "kernels/dispatch.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_int8.h"
#include "kernels/matvec_int8.h"
#include "kernels/matvec.h"
#include "kernels/matvec_blocks.h"
#include "kernels/matvec_multi.h"
#include "kernels/matmul_q6k.h"
#include "kernels/matvec_q6k.h"
#include "kernels/panel_packed_matrix.h"
#include "kernels/shared_ranges.h"
#include "tensor/aligned_buffer.h"
#include "tensor/quant_ref.h"

#ifndef HWY_DISABLED_TARGETS  // see dequant.cc
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_SSE4)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/half_scalar-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// K block: a multiple of every block size (256 covers the K-quants); a packed panel
// (kKC × NR floats, 64 KiB on AVX-512) stays in L2 while all tokens stream past it, and y is
// re-read/written once per K block, so 512 beat 256 (bench/NOTES.md).
constexpr int64_t kKC = 512;
// Panels per row block: the MR × kKC slice of x (24 KiB on AVX-512) is reused from L1
// across them.
constexpr int64_t kPanels = 4;
#if HWY_TARGET <= HWY_AVX3
constexpr int kMR = 12;  // 24 accumulators + 2 weight vectors + broadcast of 32 registers
#elif HWY_TARGET == HWY_SCALAR
constexpr int kMR = 4;
#else
constexpr int kMR = 6;  // 12 accumulators + 2 weights + broadcast of 16 registers
#endif

HWY_INLINE int64_t PanelWidth() { return 2 * static_cast<int64_t>(hn::Lanes(DF())); }

int64_t PanelWidthT() { return PanelWidth(); }

int64_t TargetT() { return HWY_TARGET; }

// Panel values as f32: f32 panels load, f16 panels (the PanelPackedMatrix copy) convert.
HWY_INLINE hn::Vec<DF> LoadPanel(const float* HWY_RESTRICT p) { return hn::Load(DF(), p); }
HWY_INLINE hn::Vec<DF> LoadPanel(const hwy::float16_t* HWY_RESTRICT p) {
  return hn::PromoteTo(DF(), hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}

// c[m][0..NR) (+)= sum_k x[m][k] * panel[k][0..NR) for m < M. x rows at stride ldx floats,
// c rows at stride ldc floats. load_c: accumulate onto c (K blocks after the first).
template <int M, typename TW>
HWY_INLINE void MicroKernel(const float* HWY_RESTRICT x, int64_t ldx,
                            const TW* HWY_RESTRICT panel, int64_t kc, float* HWY_RESTRICT c,
                            int64_t ldc, bool load_c) {
  const DF df;
  const int64_t N = hn::Lanes(df);
  using V = hn::Vec<DF>;
  V acc0[M], acc1[M];
  for (int m = 0; m < M; ++m) {
    acc0[m] = load_c ? hn::LoadU(df, c + m * ldc) : hn::Zero(df);
    acc1[m] = load_c ? hn::LoadU(df, c + m * ldc + N) : hn::Zero(df);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const V w0 = LoadPanel(panel + k * 2 * N);
    const V w1 = LoadPanel(panel + k * 2 * N + N);
    for (int m = 0; m < M; ++m) {
      const V xb = hn::Set(df, x[m * ldx + k]);
      acc0[m] = hn::MulAdd(xb, w0, acc0[m]);
      acc1[m] = hn::MulAdd(xb, w1, acc1[m]);
    }
  }
  for (int m = 0; m < M; ++m) {
    hn::StoreU(acc0[m], df, c + m * ldc);
    hn::StoreU(acc1[m], df, c + m * ldc + N);
  }
}

// MicroKernel for the short tiles (M <= 3 tokens) over P full panels at panel_stride elements
// apart (c columns [0, P·NR)): one panel gives each of a short tile's accumulators one FMA per
// k, which would wait on the FMA latency; P panels give 2·M·P independent chains (P as
// ChooseShortTile picks it). Each panel's stream is prefetched kShortAhead
// bytes ahead into L2: a decode step reads every weight once. Each output is the same FMA
// sequence as MicroKernel's, so the results are bit-identical, which keeps a token's products
// independent of how many tokens share its step (batch invariance).
constexpr int64_t kShortAhead = 2048;

template <int M, int P, typename TW>
HWY_INLINE void MicroKernelPanels(const float* HWY_RESTRICT x, int64_t ldx,
                                  const TW* HWY_RESTRICT panel, int64_t panel_stride, int64_t kc,
                                  float* HWY_RESTRICT c, int64_t ldc, bool load_c) {
  static_assert(M >= 1 && M <= 3 && M * P <= 6, "short tiles, at most 12 accumulators");
  const DF df;
  const int64_t N = hn::Lanes(df);
  using V = hn::Vec<DF>;
  V acc[M][2 * P];
  for (int m = 0; m < M; ++m) {
    for (int j = 0; j < 2 * P; ++j) {
      acc[m][j] = load_c ? hn::LoadU(df, c + m * ldc + j * N) : hn::Zero(df);
    }
  }
  const int64_t k_bytes = 2 * N * static_cast<int64_t>(sizeof(TW));  // one k step of a panel
  const int64_t per_line = std::max<int64_t>(1, 64 / k_bytes);
  for (int64_t k0 = 0; k0 < kc; k0 += per_line) {
    for (int j = 0; j < P; ++j) {
      __builtin_prefetch(
          reinterpret_cast<const char*>(panel + j * panel_stride + k0 * 2 * N) + kShortAhead, 0, 2);
    }
    const int64_t k1 = std::min(kc, k0 + per_line);
    for (int64_t k = k0; k < k1; ++k) {
      for (int j = 0; j < P; ++j) {  // a panel at a time: 2 weight registers live, not 2·P
        const V w0 = LoadPanel(panel + j * panel_stride + k * 2 * N);
        const V w1 = LoadPanel(panel + j * panel_stride + k * 2 * N + N);
        for (int m = 0; m < M; ++m) {
          const V xb = hn::Set(df, x[m * ldx + k]);
          acc[m][2 * j] = hn::MulAdd(xb, w0, acc[m][2 * j]);
          acc[m][2 * j + 1] = hn::MulAdd(xb, w1, acc[m][2 * j + 1]);
        }
      }
    }
  }
  for (int m = 0; m < M; ++m) {
    for (int j = 0; j < 2 * P; ++j) hn::StoreU(acc[m][j], df, c + m * ldc + j * N);
  }
}

template <int M, int P, typename TW>
void MicroTileShort(const float* x, int64_t ldx, const TW* panel, int64_t panel_stride,
                    int64_t kc, float* c, int64_t ldc, bool load_c) {
  MicroKernelPanels<M, P>(x, ldx, panel, panel_stride, kc, c, ldc, load_c);
}

template <int M, typename TW>
void MicroTile(const float* x, int64_t ldx, const TW* panel, int64_t kc, float* c, int64_t ldc,
               int64_t valid_cols, bool load_c) {
  const int64_t NR = PanelWidth();
  if (valid_cols == NR) return MicroKernel<M>(x, ldx, panel, kc, c, ldc, load_c);
  // Edge panel (fewer rows than NR): go through a full-width buffer.
  HWY_ALIGN float tmp[kMR * 2 * hn::MaxLanes(DF())];
  for (int m = 0; m < M; ++m) {
    std::memset(tmp + m * NR, 0, NR * sizeof(float));
    if (load_c) std::memcpy(tmp + m * NR, c + m * ldc, valid_cols * sizeof(float));
  }
  MicroKernel<M>(x, ldx, panel, kc, tmp, NR, load_c);
  for (int m = 0; m < M; ++m) std::memcpy(c + m * ldc, tmp + m * NR, valid_cols * sizeof(float));
}

template <typename TW>
using TileFn = void (*)(const float*, int64_t, const TW*, int64_t, float*, int64_t, int64_t,
                        bool);

template <typename TW, int... Ms>
constexpr auto MakeTileTable(std::integer_sequence<int, Ms...>) {
  return std::array<TileFn<TW>, sizeof...(Ms)>{
      {static_cast<TileFn<TW>>(&MicroTile<Ms + 1, TW>)...}};
}

template <typename TW>
using ShortTileFn = void (*)(const float*, int64_t, const TW*, int64_t, int64_t, float*, int64_t,
                             bool);

// The short tile for m <= 3 tokens with full_panels >= 2 full panels left, and how many
// panels it takes: one token four where it can, else two; three tokens take one on targets
// with 16 vector registers, where two panels' 12 accumulators spill (bench/NOTES.md).
template <typename TW>
ShortTileFn<TW> ChooseShortTile(int64_t m, int64_t full_panels, int* panels) {
  constexpr bool kRegisters32 = HWY_TARGET <= HWY_AVX3;
  *panels = m == 1 && full_panels >= 4 ? 4 : m == 3 && !kRegisters32 ? 1 : 2;
  if (*panels == 4) return &MicroTileShort<1, 4, TW>;
  if (*panels == 1) return &MicroTileShort<3, 1, TW>;
  static constexpr std::array<ShortTileFn<TW>, 3> kPairs = {
      {&MicroTileShort<1, 2, TW>, &MicroTileShort<2, 2, TW>, &MicroTileShort<3, 2, TW>}};
  return kPairs[m - 1];
}

// Packs rows [r0, r0 + nr) (nr <= NR), columns [k0, k0 + kc) of w into panel[kc][NR],
// zero-filling missing rows. rowbuf: NR × kc floats of scratch.
void PackPanel(const MatrixView& w, int64_t r0, int64_t nr, int64_t k0, int64_t kc,
               float* HWY_RESTRICT rowbuf, float* HWY_RESTRICT panel) {
  const int64_t NR = PanelWidth();
  const int64_t off = RowBytes(w.type, k0);
  for (int64_t i = 0; i < nr; ++i) DequantizeRow(w.type, w.row(r0 + i) + off, rowbuf + i * kc, kc);
  if (nr == NR) {
    // Full panel: transpose with gathers (one vector of rows per k), several times faster
    // than element by element; this runs once per weight per MatMul call.
    const DF df;
    const hn::RebindToSigned<DF> di;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    const auto idx0 = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(kc)));
    const auto idx1 = hn::Add(idx0, hn::Set(di, static_cast<int32_t>(N * kc)));
    for (int64_t k = 0; k < kc; ++k) {
      hn::Store(hn::GatherIndex(df, rowbuf + k, idx0), df, panel + k * NR);
      hn::Store(hn::GatherIndex(df, rowbuf + k, idx1), df, panel + k * NR + N);
    }
    return;
  }
  for (int64_t k = 0; k < kc; ++k) {
    float* dst = panel + k * NR;
    for (int64_t i = 0; i < nr; ++i) dst[i] = rowbuf[i * kc + k];
    for (int64_t i = nr; i < NR; ++i) dst[i] = 0.0f;
  }
}

// Panel p of a PanelPackedMatrix, columns [k0, k0 + kc), as f32 panel[kc][NR]: the copy is in
// panel order already, so this is a linear conversion (no gathers, no transpose).
void ConvertPanel(const PanelPackedMatrix& pk, int64_t p, int64_t k0, int64_t kc,
                  float* HWY_RESTRICT panel) {
  const int64_t NR = PanelWidth();
  const auto* src = reinterpret_cast<const hwy::float16_t*>(pk.panel(p)) + k0 * NR;
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t i = 0; i < kc * NR; i += N) hn::Store(LoadPanel(src + i), df, panel + i);
}

// Up to this many token tiles read the f16 copy in place, each converting in registers (the
// conversion overlaps the FMAs instead of a separate pass that waits on memory); more tiles
// convert each K block once into f32 scratch, as repeating it would cost more.
constexpr int64_t kInPlaceTiles = 8;

// Computes y[t][r] for all tokens and r in [r0, r1), r1 - r0 <= kPanels · PanelWidth(); r0 a
// multiple of PanelWidth(). pk: w's panel copy when its width is this target's, else null
// (each K block's panels are then dequantized and transposed into f32 scratch).
void MatMulRowsT(const MatrixView& w, const PanelPackedMatrix* pk, const float* x,
                 int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  static constexpr auto kTiles = MakeTileTable<float>(std::make_integer_sequence<int, kMR>());
  static constexpr auto kTilesF16 =
      MakeTileTable<hwy::float16_t>(std::make_integer_sequence<int, kMR>());
  const int64_t NR = PanelWidth();
  const int64_t K = w.cols;
#if !TARMAC_HWY_HARDWARE_F16
  pk = nullptr;  // never made for these targets (dispatch.h)
#endif
  TARMAC_DCHECK(pk == nullptr || pk->panel_width() == NR);  // MatMulPanels drops another width's
  const bool in_place = pk != nullptr && (n_tokens + kMR - 1) / kMR <= kInPlaceTiles;
  thread_local AlignedBuffer scratch;
  const size_t need = sizeof(float) * (NR * kKC + kPanels * kKC * NR);
  if (!in_place && scratch.size() < need) scratch.Resize(need);
  float* rowbuf = scratch.as<float>();
  float* panels = rowbuf + NR * kKC;
  const int64_t n_panels = (r1 - r0 + NR - 1) / NR;
  for (int64_t k0 = 0; k0 < K; k0 += kKC) {
    const int64_t kc = std::min(kKC, K - k0);
    for (int64_t p = 0; !in_place && p < n_panels; ++p) {
      const int64_t pr0 = r0 + p * NR;
      if (pk != nullptr) {
        ConvertPanel(*pk, pr0 / NR, k0, kc, panels + p * kKC * NR);
      } else {
        PackPanel(w, pr0, std::min(NR, r1 - pr0), k0, kc, rowbuf, panels + p * kKC * NR);
      }
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kMR) {
      const int64_t m = std::min<int64_t>(kMR, n_tokens - t0);
      for (int64_t p = 0; p < n_panels; ++p) {
        const int64_t pr0 = r0 + p * NR;
        const float* xt = x + t0 * K + k0;
        float* yt = y + t0 * w.rows + pr0;
        const int64_t valid = std::min(NR, r1 - pr0);
        if (m <= 3 && r1 - pr0 >= 2 * NR) {  // a short tile over full panels
          int taken = 0;
          if (in_place) {
            const auto* src = reinterpret_cast<const hwy::float16_t*>(pk->panel(pr0 / NR)) + k0 * NR;
            ChooseShortTile<hwy::float16_t>(m, (r1 - pr0) / NR, &taken)(xt, K, src, K * NR, kc, yt,
                                                                        w.rows, k0 > 0);
          } else {
            ChooseShortTile<float>(m, (r1 - pr0) / NR, &taken)(xt, K, panels + p * kKC * NR,
                                                               kKC * NR, kc, yt, w.rows, k0 > 0);
          }
          p += taken - 1;
          continue;
        }
        if (in_place) {
          const auto* src = reinterpret_cast<const hwy::float16_t*>(pk->panel(pr0 / NR)) + k0 * NR;
          kTilesF16[m - 1](xt, K, src, kc, yt, w.rows, valid, k0 > 0);
        } else {
          kTiles[m - 1](xt, K, panels + p * kKC * NR, kc, yt, w.rows, valid, k0 > 0);
        }
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {
HWY_EXPORT(MatMulRowsT);
HWY_EXPORT(PanelWidthT);
HWY_EXPORT(TargetT);

int64_t MatMulHwyTarget() { return HWY_DYNAMIC_DISPATCH(TargetT)(); }
int64_t MatMulPanelWidth() { return HWY_DYNAMIC_DISPATCH(PanelWidthT)(); }

void MatMul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  TARMAC_CHECK(IsMatVecType(w.type));
  TARMAC_CHECK(n_tokens >= 0 && w.rows >= 0);
  TARMAC_CHECK(w.cols >= 0 && w.cols % Traits(w.type).block_size == 0);
  TARMAC_CHECK(w.rows <= 1 || w.row_stride >= RowBytes(w.type, w.cols));
  if (n_tokens == 0 || w.rows == 0) return;
  // The choice is the dispatch table's (dispatch.h); this only runs it.
  switch (ChooseMatMulKernel({w.type, n_tokens, w.prepared_layout()})) {
    case MatMulKernel::kMatVec:
      return MatVec(w, x, y, pool);
    case MatMulKernel::kMatVecInt8:
      return MatVecInt8(w, x, y, pool);
    case MatMulKernel::kInterleavedInt8: {
      if (n_tokens == 1) return MatVecInt8(w, x, y, pool);
      const MatrixView* ws[1] = {&w};
      float* ys[1] = {y};
      return MatVecInt8Fused(ws, ys, 1, x, n_tokens, pool);
    }
    case MatMulKernel::kMatVecQ6K:
      return MatVecQ6K(w, x, n_tokens, y, pool);
    case MatMulKernel::kMatVecMulti:
      return MatVecMulti(w, x, n_tokens, y, pool);
    case MatMulKernel::kMatVecBlocks:
      return MatVecBlocks(w, x, n_tokens, y, pool);
    case MatMulKernel::kMatMulInt8:
      return MatMulInt8(w, x, n_tokens, y, pool);
    case MatMulKernel::kMatMulQ6K:
      return MatMulQ6K(w, x, n_tokens, y, pool);
    case MatMulKernel::kMatMulAmx:
      return MatMulAmx(w, x, n_tokens, y, pool);
    case MatMulKernel::kMatMulPanels:
      return MatMulPanels(w, x, n_tokens, y, pool);
  }
}

int64_t GemmRowBlock(int64_t rows, int64_t panel_rows, int threads) {
  TARMAC_DCHECK(rows >= 0 && panel_rows >= 1 && threads >= 1);
  const int64_t per_thread = panel_rows * 4 * threads;
  return panel_rows * std::clamp<int64_t>((rows + per_thread - 1) / per_thread, 1, 4);
}

void MatMulPanels(const MatrixView& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool* pool) {
  const MatrixView* ws[1] = {&w};
  float* ys[1] = {y};
  MatMulPanelsShared(ws, ys, 1, x, n_tokens, pool);
}

void MatMulPanelsShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                        int64_t n_tokens, ThreadPool* pool) {
  constexpr int kMax = SharedRanges::kMax;
  TARMAC_CHECK(n >= 1 && n <= kMax && n_tokens >= 0);
  const int64_t cols = ws[0]->cols;
  if (cols == 0) {
    for (int i = 0; i < n; ++i) std::fill(ys[i], ys[i] + n_tokens * ws[i]->rows, 0.0f);
    return;
  }
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t nr = HWY_DYNAMIC_DISPATCH(PanelWidthT)();
  // One block size over all the rows, so the blocks of small matrices (K/V) are as large as
  // the others'; every matrix starts at a block (and so at a panel) boundary.
  int64_t total_rows = 0;
  for (int i = 0; i < n; ++i) {
    TARMAC_CHECK(ws[i]->cols == cols && ws[i]->rows >= 0);
    total_rows += ws[i]->rows;
  }
  const int64_t block = GemmRowBlock(total_rows, nr, threads);
  const PanelPackedMatrix* pk[kMax];
  int64_t blocks[kMax];
  for (int i = 0; i < n; ++i) {
    pk[i] = PreparedAs<PanelPackedMatrix>(*ws[i]);
    if (pk[i] != nullptr && pk[i]->panel_width() != nr) pk[i] = nullptr;  // another level's
    // A copy that replaced its source is made at the level the kernels run at (a level set
    // after load would need the source).
    TARMAC_CHECK(ws[i]->data != nullptr || pk[i] != nullptr);
    blocks[i] = (ws[i]->rows + block - 1) / block;
  }
  const SharedRanges ranges(blocks, n);  // the matrices' row blocks, one after another
  auto run = [&](int64_t b0, int64_t b1, int) {
    ranges.ForEach(b0, b1, [&](int i, int64_t lb, int64_t le) {
      for (int64_t b = lb; b < le; ++b) {
        HWY_DYNAMIC_DISPATCH(MatMulRowsT)(*ws[i], pk[i], x, n_tokens, ys[i], b * block,
                                          std::min(ws[i]->rows, (b + 1) * block));
      }
    });
  };
  const int64_t n_blocks = ranges.total();
  if (threads == 1 || n_blocks <= 1) {
    run(0, n_blocks, 0);
  } else {
    pool->ParallelFor(n_blocks, 1, run);
  }
}

void MatMulShared(const MatrixView* const* ws, float* const* ys, int n, const float* x,
                  int64_t n_tokens, ThreadPool* pool) {
  TARMAC_CHECK(n >= 1);
  for (int i = 0; i < n; ++i) TARMAC_CHECK(ws[i]->cols == ws[0]->cols);
  if (n_tokens == 0) return;
  // A few tokens of interleaved Q8_0/Q4_0/Q4_K: x quantized once, one region for all.
  if (n_tokens <= kInterleavedMaxTokens && CanFuseMatVecInt8(ws, n)) {
    return MatVecInt8Fused(ws, ys, n, x, n_tokens, pool);
  }
  // Pre-split weights on AMX: one split of x and one region for all.
  if (n_tokens >= kAmxPackedMinTokens && CanShareMatMulAmx(ws, n)) {
    return MatMulAmxShared(ws, ys, n, x, n_tokens, pool);
  }
  // One kernel for all with a fused form: one region for all (a job per matrix hands off
  // between threads and leaves one waiting at its end each time).
  const MatMulKernel k = ChooseMatMulKernel({ws[0]->type, n_tokens, ws[0]->prepared_layout()});
  bool same = n <= SharedRanges::kMax, one_type = true;
  for (int i = 0; i < n && same; ++i) {
    same = ws[i]->rows > 0 &&
           ChooseMatMulKernel({ws[i]->type, n_tokens, ws[i]->prepared_layout()}) == k;
    one_type = one_type && ws[i]->type == ws[0]->type;
  }
  if (same && k == MatMulKernel::kMatMulPanels) return MatMulPanelsShared(ws, ys, n, x, n_tokens, pool);
  // MatVec prepares x for one dtype.
  if (same && one_type && k == MatMulKernel::kMatVec) return MatVecShared(ws, ys, n, x, pool);
  if (same && k == MatMulKernel::kMatVecMulti) return MatVecMultiShared(ws, ys, n, x, n_tokens, pool);
  for (int i = 0; i < n; ++i) MatMul(*ws[i], x, n_tokens, ys[i], pool);
}

void MatMulGlu(const MatrixView& w_gate, const MatrixView& w_up, const float* x,
               int64_t n_tokens, GluKind kind, float* gate, float* up, ThreadPool* pool) {
  TARMAC_CHECK(w_gate.rows == w_up.rows && w_gate.cols == w_up.cols && n_tokens >= 0);
  const MatrixView* ws[2] = {&w_gate, &w_up};
  if (n_tokens >= 1 && n_tokens <= kInterleavedMaxTokens && CanFuseMatVecInt8(ws, 2)) {
    return MatVecInt8Glu(w_gate, w_up, x, n_tokens, kind, gate, up, pool);
  }
  float* ys[2] = {gate, up};
  MatMulShared(ws, ys, 2, x, n_tokens, pool);
  const int64_t total = n_tokens * w_gate.rows;
  auto act = [&](int64_t b, int64_t e, int) { ApplyGlu(kind, gate + b, up + b, gate + b, e - b); };
  const int threads = pool ? pool->num_threads() : 1;
  if (threads == 1 || n_tokens < 16) return act(0, total, 0);
  // Up to 4 chunks per thread: a batch's activation is a few microseconds per thread.
  pool->ParallelFor(total, (total + 4 * threads - 1) / (4 * threads), act);
}

void MatMulRef(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  std::vector<float> wf(w.rows * w.cols);
  for (int64_t r = 0; r < w.rows; ++r) DequantizeRowRef(w.type, w.row(r), &wf[r * w.cols], w.cols);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double s = 0;
      for (int64_t k = 0; k < w.cols; ++k) s += static_cast<double>(wf[r * w.cols + k]) * x[t * w.cols + k];
      y[t * w.rows + r] = static_cast<float>(s);
    }
  }
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
