// Products of the other block types with int8 activations on AVX2 (see matvec_blocks.h).

#include "kernels/matvec_blocks.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/block_decode_unit-inl.h"
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

// One call's quantized activations, per token t: q at q + t·q_stride (K bytes, padded to a
// whole unit with zeros), the block scales at dx + t·nb, the sums of q over each 16 elements
// at qsum + t·ng (ng = K / 16).
struct Acts {
  const int8_t* q;
  int64_t q_stride;
  const float* dx;
  int64_t nb;
  const float* qsum;
  int64_t ng;
};

// The quantization above, into a per-thread buffer that only grows (decode steps allocate
// nothing once warm); valid until the same thread quantizes again.
Acts QuantizeTokens(const float* x, int64_t n_tokens, int64_t cols) {
  const int64_t nb = cols / kQB, ng = cols / 16;
  const int64_t q_stride = (cols + kUnit - 1) / kUnit * kUnit;
  const int64_t per_token = q_stride + 4 * nb + 4 * ng;
  thread_local AlignedBuffer buf;
  // + 2·nb floats of scratch below, + 16 floats: a row's last unit of 32-blocks may hold fewer
  // than 8 blocks, and its offset pass reads (and masks off) a whole unit's worth.
  const size_t need = static_cast<size_t>(n_tokens * per_token + 8 * nb + 64);
  if (buf.size() < need) buf.Resize(need);
  auto* q = buf.as<int8_t>();
  auto* dx = reinterpret_cast<float*>(buf.data() + n_tokens * q_stride);
  auto* qsum = dx + n_tokens * nb;
  auto* corr = reinterpret_cast<int32_t*>(qsum + n_tokens * ng);  // scratch, unread
  auto* s = reinterpret_cast<float*>(corr + nb);                  // scratch, unread
  for (int64_t t = 0; t < n_tokens; ++t) {
    int8_t* qt = q + t * q_stride;
    QuantizeActivationsQ8(x + t * cols, cols, 0, qt, dx + t * nb, corr, s);
    std::fill(qt + cols, qt + q_stride, int8_t{0});
    for (int64_t g = 0; g < ng; ++g) {
      int sum = 0;
      for (int e = 0; e < 16; ++e) sum += qt[16 * g + e];
      qsum[t * ng + g] = static_cast<float>(sum);
    }
  }
  return {q, q_stride, dx, nb, qsum, ng};
}

#if TARMAC_BLOCKS_X86
using blocks_internal::DecodeUnit;
using blocks_internal::Unit;

TARMAC_BLOCKS_TARGET_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// acc += the unit's products with token a's activations of unit u; off += its offset terms.
TARMAC_BLOCKS_TARGET_AVX2 __attribute__((always_inline)) inline void UnitDot(
    const Unit& un, const int8_t* q, const float* dx, const float* qsum, __m256& acc,
    __m256& off) {
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
  if (un.offsets) {
    // Per 16-weight group: o_g · d_x · sum q, over the unit's 2 · chunks groups.
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
}

// Rows [r0, r1) of w, every token: each unit decoded once, then dotted with each token.
template <DType kT>
TARMAC_BLOCKS_TARGET_AVX2 void RowsT(const MatrixView& w, const Acts& a, const StreamPrefetch& pf,
                                     int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  const int64_t units = (w.cols + kUnit - 1) / kUnit;
  const int64_t unit_bytes = RowBytes(kT, std::min<int64_t>(kUnit, w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m256 acc[kBlocksMaxTokens], off[kBlocksMaxTokens];
    for (int64_t t = 0; t < n_tokens; ++t) acc[t] = off[t] = _mm256_setzero_ps();
    for (int64_t u = 0; u < units; ++u) {
      PrefetchSpan(pf, row + u * unit_bytes, unit_bytes);
      Unit un;
      DecodeUnit<kT>(row, u, w.cols, &un);
      for (int64_t t = 0; t < n_tokens; ++t) {
        UnitDot(un, a.q + t * a.q_stride + kUnit * u, a.dx + t * a.nb + 8 * u,
                a.qsum + t * a.ng + 16 * u, acc[t], off[t]);
      }
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      y[t * w.rows + r] = HorizontalSum(_mm256_add_ps(acc[t], off[t]));
    }
  }
}

using RowsFn = void (*)(const MatrixView&, const Acts&, const StreamPrefetch&, int64_t, float*,
                        int64_t, int64_t);

RowsFn RowsFor(DType t) {
  RowsFn fn = nullptr;
  blocks_internal::WithBlocksType(t, [&fn](auto kT) { fn = RowsT<decltype(kT)::value>; });
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
  const Acts a = QuantizeTokens(x, n_tokens, w.cols);
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
  std::vector<int8_t> q(K);
  std::vector<float> dx(K / kQB), wf(K);
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeActivationsQ8Ref(x + t * K, K, q.data(), dx.data());
    for (int64_t r = 0; r < w.rows; ++r) {
      DequantizeRowRef(w.type, w.row(r), wf.data(), K);
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(wf[k]) * (double(dx[k / kQB]) * q[k]);
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace tarmac::kernels
