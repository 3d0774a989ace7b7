// Q6_K products with int8 activations on AVX2 (see matvec_q6k.h).

#include "kernels/matvec_q6k.h"

#include <algorithm>
#include <vector>

#include "base/check.h"
#include "kernels/avx2_reduce-inl.h"
#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"
#include "kernels/matmul_int8.h"
#include "kernels/q6k_avx2-inl.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TARMAC_Q6K_X86 1
#include <immintrin.h>
#define TARMAC_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define TARMAC_Q6K_X86 0
#endif

namespace tarmac::kernels {
namespace {

constexpr int64_t kQB = 32;        // activation block (and weight chunk) width
constexpr int64_t kChunks = 8;     // 32-weight chunks per super-block
constexpr int kMaxNT = 4;          // tokens per pass over a row (registers)

// One call's quantized activations, per token t: q at q + t·q_stride (K bytes), the bias
// pairs 32·(q[2j] + q[2j+1]) of chunk c at bias + (t·nb + c)·16 (int16), the block scales at
// dx + t·nb. nb = K / 32.
struct Acts {
  const int8_t* q;
  int64_t q_stride;
  const int16_t* bias;
  const float* dx;
  int64_t nb;
};

// The quantization above, into a per-thread buffer that only grows (decode steps allocate
// nothing once warm); valid until the same thread quantizes again.
Acts QuantizeTokens(const float* x, int64_t n_tokens, int64_t cols) {
  const int64_t nb = cols / kQB;
  const int64_t q_stride = (cols + 63) / 64 * 64;
  // Per token: q (q_stride bytes), bias (16 int16 per block: cols bytes), dx (nb floats).
  // Then one token's corr and s (nb each, 4 bytes), scratch this kernel does not read.
  const int64_t per_token = q_stride + cols + 4 * nb;
  thread_local AlignedBuffer buf;
  const size_t need = static_cast<size_t>(n_tokens * per_token + 8 * nb);
  if (buf.size() < need) buf.Resize(need);
  auto* q = buf.as<int8_t>();
  auto* bias = reinterpret_cast<int16_t*>(buf.data() + n_tokens * q_stride);
  auto* dx = reinterpret_cast<float*>(bias + n_tokens * nb * 16);
  auto* corr = reinterpret_cast<int32_t*>(dx + n_tokens * nb);
  auto* s = reinterpret_cast<float*>(corr + nb);
  for (int64_t t = 0; t < n_tokens; ++t) {
    int8_t* qt = q + t * q_stride;
    QuantizeActivationsQ8(x + t * cols, cols, 0, qt, dx + t * nb, corr, s);
    int16_t* bt = bias + t * nb * 16;
    for (int64_t j = 0; j < cols / 2; ++j) bt[j] = static_cast<int16_t>(32 * (qt[2 * j] + qt[2 * j + 1]));
  }
  return {q, q_stride, bias, dx, nb};
}

#if TARMAC_Q6K_X86
// vpshufb masks that spread scales 2m (low lane) and 2m + 1 (high lane) of a super-block over a
// chunk's int16 lanes as 256·scale: the scale byte in each lane's high byte, zero (index bit 7)
// in its low byte. One shuffle per chunk, no sign-extending shift; 1/256 goes into the
// super-block's d (powers of two scale exactly, so barring a subnormal d_w·d_x the products are
// those of the plain scales). vpmaddwd cannot overflow: |pair sum| <= 8128, |256·scale| <= 32768.
alignas(32) constexpr uint8_t kScaleMask[kChunks][32] = {
#define TARMAC_Q6K_LO(m) 0x80, 2 * m, 0x80, 2 * m, 0x80, 2 * m, 0x80, 2 * m
#define TARMAC_Q6K_HI(m) 0x80, 2 * m + 1, 0x80, 2 * m + 1, 0x80, 2 * m + 1, 0x80, 2 * m + 1
#define TARMAC_Q6K_MASK(m) \
  {TARMAC_Q6K_LO(m), TARMAC_Q6K_LO(m), TARMAC_Q6K_HI(m), TARMAC_Q6K_HI(m)}
    TARMAC_Q6K_MASK(0), TARMAC_Q6K_MASK(1), TARMAC_Q6K_MASK(2), TARMAC_Q6K_MASK(3),
    TARMAC_Q6K_MASK(4), TARMAC_Q6K_MASK(5), TARMAC_Q6K_MASK(6), TARMAC_Q6K_MASK(7),
#undef TARMAC_Q6K_MASK
#undef TARMAC_Q6K_HI
#undef TARMAC_Q6K_LO
};


// Super-block b (the row's i-th) for token 0 of a into acc[0] / acc[1] (even / odd chunks).
// d_w · d_x per chunk formed in registers (a table on the stack costs one token the
// store-to-load latency; bench/NOTES.md).
TARMAC_TARGET_AVX2 inline void SuperBlockOneToken(const BlockQ6_K& b, int64_t i, const Acts& a,
                                                  __m256 (&acc)[2]) {
  const __m256i scb =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const __m256 vd = _mm256_set1_ps(_cvtsh_ss(b.d) * (1.0f / 256));  // the masks' 256
  for (int h = 0; h < 2; ++h) {
    __m256i u[4];  // chunks 4h .. 4h + 3
    q6k_internal::UnpackHalfAvx2(b, h, u);
    for (int k = 0; k < 4; ++k) {
      const int m = 4 * h + k;
      const __m256i sc =
          _mm256_shuffle_epi8(scb, _mm256_load_si256(reinterpret_cast<const __m256i*>(kScaleMask[m])));
      const int64_t c = kChunks * i + m;  // the activation block
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + kQB * c));
      const __m256i bias = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.bias + c * 16));
      const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u[k], xv), bias);
      const __m256 scale = _mm256_mul_ps(vd, _mm256_broadcast_ss(a.dx + c));
      acc[k % 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, sc)), scale, acc[k % 2]);
    }
  }
}

// Token 0 of a over rows ra and rb at once, each as RowTokens<1> computes it (op for op): two
// weight streams keep more of the matrix in flight than one (bench/NOTES.md).
TARMAC_TARGET_AVX2 void RowPair(const BlockQ6_K* ra, const BlockQ6_K* rb, int64_t nsb,
                                const Acts& a, float* ya, float* yb, const StreamPrefetch& pf) {
  __m256 acc_a[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256 acc_b[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = 0; i < nsb; ++i) {
    PrefetchSpan(pf, reinterpret_cast<const uint8_t*>(ra + i), 256);
    PrefetchSpan(pf, reinterpret_cast<const uint8_t*>(rb + i), 256);
    SuperBlockOneToken(ra[i], i, a, acc_a);
    SuperBlockOneToken(rb[i], i, a, acc_b);
  }
  *ya = HorizontalSumAvx2(_mm256_add_ps(acc_a[0], acc_a[1]));
  *yb = HorizontalSumAvx2(_mm256_add_ps(acc_b[0], acc_b[1]));
}

// y[t·y_stride] = row · x[t] for NT tokens of a (starting at token 0 of a).
// pf: the AVX2 decode plan's distances (dispatch.h), one step per super-block.
template <int NT>
TARMAC_TARGET_AVX2 void RowTokens(const BlockQ6_K* b, int64_t nsb, const Acts& a, float* y,
                                  int64_t y_stride, const StreamPrefetch& pf) {
  __m256 acc[NT][2];
  for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i) {
    PrefetchSpan(pf, reinterpret_cast<const uint8_t*>(b + i), 256);
    if constexpr (NT == 1) {
      SuperBlockOneToken(b[i], i, a, acc[0]);
      continue;
    }
    const __m256i scb =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].scales)));
    const __m256 vd = _mm256_set1_ps(_cvtsh_ss(b[i].d) * (1.0f / 256));  // the masks' 256
    // d_w · d_x per chunk from a table (a mul per token and chunk costs several tokens vector
    // ops; bench/NOTES.md); the same products as SuperBlockOneToken's.
    alignas(32) float dxd[NT][kChunks];
    for (int t = 0; t < NT; ++t) {
      _mm256_store_ps(dxd[t], _mm256_mul_ps(vd, _mm256_loadu_ps(a.dx + t * a.nb + kChunks * i)));
    }
    for (int h = 0; h < 2; ++h) {
      __m256i u[4];  // chunks 4h .. 4h + 3
      q6k_internal::UnpackHalfAvx2(b[i], h, u);
      for (int k = 0; k < 4; ++k) {
        const int m = 4 * h + k;
        const __m256i sc =
            _mm256_shuffle_epi8(scb, _mm256_load_si256(reinterpret_cast<const __m256i*>(kScaleMask[m])));
        const int64_t c = kChunks * i + m;  // the activation block
        for (int t = 0; t < NT; ++t) {
          const __m256i xv =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + t * a.q_stride + kQB * c));
          const __m256i bias =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(a.bias + (t * a.nb + c) * 16));
          const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u[k], xv), bias);
          const __m256 scale = _mm256_broadcast_ss(&dxd[t][m]);
          acc[t][k % 2] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, sc)), scale, acc[t][k % 2]);
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) y[t * y_stride] = HorizontalSumAvx2(_mm256_add_ps(acc[t][0], acc[t][1]));
}

TARMAC_TARGET_AVX2 void Rows(const MatrixView& w, const Acts& a, const StreamPrefetch& pf,
                             int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  const int64_t nsb = w.cols / kQK_K;
  if (n_tokens == 1) {
    // Two streams far apart: the range's first half beside its second (adjacent rows, one
    // stream, were slower than one row at a time; bench/NOTES.md). An odd row runs below.
    const auto row = [&w](int64_t r) { return reinterpret_cast<const BlockQ6_K*>(w.row(r)); };
    const int64_t half = (r1 - r0) / 2;
    for (int64_t k = 0; k < half; ++k) {
      RowPair(row(r0 + k), row(r0 + half + k), nsb, a, y + r0 + k, y + r0 + half + k, pf);
    }
    r0 += 2 * half;
  }
  for (int64_t r = r0; r < r1; ++r) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(w.row(r));
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxNT) {
      const Acts at{a.q + t0 * a.q_stride, a.q_stride, a.bias + t0 * a.nb * 16, a.dx + t0 * a.nb, a.nb};
      float* yt = y + t0 * w.rows + r;
      switch (std::min<int64_t>(kMaxNT, n_tokens - t0)) {
        case 1: RowTokens<1>(b, nsb, at, yt, w.rows, pf); break;
        case 2: RowTokens<2>(b, nsb, at, yt, w.rows, pf); break;
        case 3: RowTokens<3>(b, nsb, at, yt, w.rows, pf); break;
        default: RowTokens<4>(b, nsb, at, yt, w.rows, pf); break;
      }
    }
  }
}
#endif  // TARMAC_Q6K_X86

void CheckShape(const MatrixView& w, int64_t n_tokens) {
  TARMAC_CHECK(w.type == DType::kQ6_K);
  TARMAC_CHECK(w.rows >= 0 && w.cols >= 0 && w.cols % kQK_K == 0);
  TARMAC_CHECK(w.rows <= 1 || w.row_stride >= RowBytes(w.type, w.cols));
  TARMAC_CHECK(n_tokens >= 1 && n_tokens <= kQ6KMaxTokens);
}

}  // namespace

bool MatVecQ6KAvailable() { return TARMAC_Q6K_X86 && Cpu().x86 && IsaAtLeast(Isa::kAvx2); }

void MatVecQ6K(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  CheckShape(w, n_tokens);
  TARMAC_CHECK(MatVecQ6KAvailable());
  if (w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
#if TARMAC_Q6K_X86
  const Acts a = QuantizeTokens(x, n_tokens, w.cols);
  const StreamPrefetch pf = ChooseStreamPrefetch(Isa::kAvx2);
  auto run = [&](int64_t r0, int64_t r1, int) { Rows(w, a, pf, n_tokens, y, r0, r1); };
  const int threads = pool ? pool->num_threads() : 1;
  if (threads == 1 || w.rows < 2) {
    run(0, w.rows, 0);
    return;
  }
  // Contiguous chunks (sequential reads per thread), shrinking towards the end for balance
  // (8 uniform chunks per thread were ~2% slower at 1B Q6_K decode; bench/NOTES.md).
  pool->ParallelForGuided(w.rows, 16, run);
#endif
}

void MatVecQ6KRef(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  CheckShape(w, n_tokens);
  const int64_t K = w.cols, nb = K / kQB;
  std::vector<int8_t> q(K);
  std::vector<float> dx(nb);
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeActivationsQ8Ref(x + t * K, K, q.data(), dx.data());
    for (int64_t r = 0; r < w.rows; ++r) {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(w.row(r));
      double acc = 0;
      for (int64_t i = 0; i < K / kQK_K; ++i) {
        const double d = F16ToF32(b[i].d);
        for (int g = 0; g < 16; ++g) {  // 16-element groups, one scale each
          int32_t isum = 0;
          for (int e = 16 * g; e < 16 * g + 16; ++e) isum += (Q6KQuant(b[i], e) - 32) * q[kQK_K * i + e];
          acc += d * b[i].scales[g] * double(dx[kChunks * i + g / 2]) * isum;
        }
      }
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace tarmac::kernels
