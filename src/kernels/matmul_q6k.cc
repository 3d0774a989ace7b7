// Q6_K GEMM with int8 activations on AVX2 (see matmul_q6k.h).

#include "kernels/matmul_q6k.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_int8.h"
#include "kernels/q6k_avx2-inl.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tarmac::kernels {
namespace {

constexpr int64_t kQB = 32;                    // activation block and slab block width
constexpr int64_t kSuperBlocks = kQK_K / kQB;  // 32-blocks per super-block
constexpr int64_t kSlabRows = 16;
constexpr int64_t kKCB = 2 * kSuperBlocks;     // K chunk in 32-blocks: two super-blocks
// One 32-block of a slab (16 rows): u as [8 k-groups][16 rows][4 k] bytes; the scales as int16
// pairs (sc, sc), [sub-block][8-row half][8 rows][2]; the rows' super-block d as f32 [16].
constexpr int64_t kScaleOff = 512, kDOff = 640, kBlockBytes = 704;
constexpr int kMaxM = 4;  // tokens per tile: 4 f32 and 4 int32 accumulators in registers

// All tokens' quantized activations: q at q + t·ldq (K bytes), the block scales at dx + t·nb,
// and per 32-block two int32 biases at bias + (t·nb + b)·2, one per 16-element sub-block: two
// int16 lanes, 32 · the sum of the q that vpmaddubsw pairs into the even (low) and the odd
// (high) int16 lane of a row over the sub-block's four k-groups.
struct Acts {
  const int8_t* q;
  int64_t ldq;
  const float* dx;
  const int32_t* bias;
  int64_t nb;
};

void SubBlockBiases(const int8_t* q, int64_t nb, int32_t* bias) {
  for (int64_t b = 0; b < nb; ++b) {
    for (int s = 0; s < 2; ++s) {
      int32_t lo = 0, hi = 0;
      for (int g = 4 * s; g < 4 * s + 4; ++g) {
        const int8_t* qg = q + b * kQB + 4 * g;
        lo += qg[0] + qg[1];
        hi += qg[2] + qg[3];
      }
      // |32 · sum| <= 32 · 8 · 127 < 2^15: both fit their int16 lane.
      bias[b * 2 + s] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(32 * lo)) |
                                             static_cast<uint32_t>(static_cast<uint16_t>(32 * hi)) << 16);
    }
  }
}

void CheckShape(const MatrixView& w, int64_t n_tokens) {
  TARMAC_CHECK(w.type == DType::kQ6_K);
  TARMAC_CHECK(w.rows >= 0 && w.cols >= 0 && w.cols % kQK_K == 0);
  TARMAC_CHECK(w.rows <= 1 || w.row_stride >= RowBytes(w.type, w.cols));
  TARMAC_CHECK(n_tokens >= 0);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TARMAC_MMQ6K_X86 1

// 4 activation bytes (one k-group of a token) in every int32 lane.
TARMAC_Q6K_TARGET_AVX2 __attribute__((always_inline)) inline __m256i BroadcastQ(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// out[g] = (int32 g of r[0], ..., int32 g of r[7]): an 8×8 transpose of 4-byte groups.
TARMAC_Q6K_TARGET_AVX2 __attribute__((always_inline)) inline void Transpose8x8(__m256i (&r)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int g = 0; g < 4; ++g) {
    r[g] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x20);
    r[4 + g] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x31);
  }
}

// Rows [r0, r0 + nrows) (nrows <= 16; the rest zero, with scale and d 0), 32-blocks
// [b0, b0 + nbk) (whole super-blocks) into one slab: 8 rows at a time, each super-block's rows
// unpacked to bytes, then each 32-block's 8 rows transposed into the slab's k-group order.
TARMAC_Q6K_TARGET_AVX2 void PackSlab(const MatrixView& w, int64_t r0, int64_t nrows, int64_t b0,
                                     int64_t nbk, uint8_t* dst) {
  TARMAC_DCHECK(b0 % kSuperBlocks == 0 && nbk % kSuperBlocks == 0);
  alignas(32) uint8_t u8[8][kQK_K];  // a super-block of each row of the half, as u bytes
  for (int hf = 0; hf < 2; ++hf) {
    const int64_t n = std::clamp<int64_t>(nrows - 8 * hf, 0, 8);
    for (int64_t sb = 0; sb < nbk / kSuperBlocks; ++sb) {
      uint8_t* ds = dst + sb * kSuperBlocks * kBlockBytes;  // the super-block's 8 slab blocks
      for (int64_t i = 0; i < 8; ++i) {
        float d = 0.0f;
        int8_t sc[kQK_K / 16] = {};
        if (i < n) {
          const BlockQ6_K& blk =
              reinterpret_cast<const BlockQ6_K*>(w.row(r0 + 8 * hf + i))[b0 / kSuperBlocks + sb];
          for (int h = 0; h < 2; ++h) {
            __m256i u[4];
            q6k_internal::UnpackHalfAvx2(blk, h, u);
            for (int k = 0; k < 4; ++k)
              _mm256_store_si256(reinterpret_cast<__m256i*>(u8[i] + 32 * (4 * h + k)), u[k]);
          }
          d = F16ToF32(blk.d);
          std::memcpy(sc, blk.scales, sizeof sc);
        } else {
          std::memset(u8[i], 0, kQK_K);
        }
        for (int64_t c = 0; c < kSuperBlocks; ++c) {
          uint8_t* db = ds + c * kBlockBytes;
          for (int s = 0; s < 2; ++s) {
            const int16_t pair[2] = {sc[2 * c + s], sc[2 * c + s]};
            std::memcpy(db + kScaleOff + 64 * s + 32 * hf + 4 * i, pair, 4);
          }
          std::memcpy(db + kDOff + 4 * (8 * hf + i), &d, 4);
        }
      }
      for (int64_t c = 0; c < kSuperBlocks; ++c) {
        __m256i r[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(u8[i] + 32 * c));
        Transpose8x8(r);
        uint8_t* db = ds + c * kBlockBytes;
        for (int g = 0; g < 8; ++g) _mm256_store_si256(reinterpret_cast<__m256i*>(db + 64 * g + 32 * hf), r[g]);
      }
    }
  }
}

// c[m][8h .. 8h + 8) (+)= the 8 rows of half h of a slab, nbk blocks, for tokens [0, M) of a.
template <int M>
TARMAC_Q6K_TARGET_AVX2 void HalfTile(const uint8_t* wp, int64_t nbk, const Acts& a, int h,
                                     float* c, int64_t ldc, bool load_c) {
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = load_c ? _mm256_loadu_ps(c + m * ldc + 8 * h) : _mm256_setzero_ps();
  for (int64_t b = 0; b < nbk; ++b) {
    const uint8_t* wb = wp + b * kBlockBytes;
    __m256i isum[M];
    for (int s = 0; s < 2; ++s) {
      __m256i wv[4];
      for (int g = 0; g < 4; ++g)
        wv[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 64 * (4 * s + g) + 32 * h));
      const __m256i sc =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + kScaleOff + 64 * s + 32 * h));
      for (int m = 0; m < M; ++m) {
        const int8_t* xb = a.q + m * a.ldq + b * kQB + 16 * s;
        __m256i p = _mm256_maddubs_epi16(wv[0], BroadcastQ(xb));
        for (int g = 1; g < 4; ++g) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(wv[g], BroadcastQ(xb + 4 * g)));
        p = _mm256_sub_epi16(p, _mm256_set1_epi32(a.bias[(m * a.nb + b) * 2 + s]));
        const __m256i v = _mm256_madd_epi16(p, sc);
        isum[m] = s == 0 ? v : _mm256_add_epi32(isum[m], v);
      }
    }
    const __m256 dw = _mm256_load_ps(reinterpret_cast<const float*>(wb + kDOff + 32 * h));
    for (int m = 0; m < M; ++m) {
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]),
                               _mm256_mul_ps(dw, _mm256_set1_ps(a.dx[m * a.nb + b])), acc[m]);
    }
  }
  for (int m = 0; m < M; ++m) _mm256_storeu_ps(c + m * ldc + 8 * h, acc[m]);
}

template <int M>
void Tile(const uint8_t* wp, int64_t nbk, const Acts& a, float* c, int64_t ldc, bool load_c) {
  HalfTile<M>(wp, nbk, a, 0, c, ldc, load_c);
  HalfTile<M>(wp, nbk, a, 1, c, ldc, load_c);
}
using TileFn = void (*)(const uint8_t*, int64_t, const Acts&, float*, int64_t, bool);
constexpr TileFn kTiles[kMaxM] = {&Tile<1>, &Tile<2>, &Tile<3>, &Tile<4>};

// y[t][r] for all tokens, rows [r0, r1): per K chunk, the rows' slabs are packed once and
// every token tile runs over them.
void Rows(const MatrixView& w, const Acts& a, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  const int64_t n_slabs = (r1 - r0 + kSlabRows - 1) / kSlabRows;
  const int64_t slab_stride = kKCB * kBlockBytes;
  thread_local AlignedBuffer scratch;
  const size_t need = static_cast<size_t>(n_slabs * slab_stride);
  if (scratch.size() < need) scratch.Resize(need);
  uint8_t* packed = scratch.data();
  alignas(32) float tmp[kMaxM * kSlabRows];  // a partial slab's outputs
  for (int64_t kb0 = 0; kb0 < a.nb; kb0 += kKCB) {
    const int64_t nbk = std::min(kKCB, a.nb - kb0);
    for (int64_t s = 0; s < n_slabs; ++s) {
      const int64_t sr0 = r0 + s * kSlabRows;
      PackSlab(w, sr0, std::min(kSlabRows, r1 - sr0), kb0, nbk, packed + s * slab_stride);
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kMaxM) {
      const int m = static_cast<int>(std::min<int64_t>(kMaxM, n_tokens - t0));
      const Acts at{a.q + t0 * a.ldq + kb0 * kQB, a.ldq, a.dx + t0 * a.nb + kb0,
                    a.bias + (t0 * a.nb + kb0) * 2, a.nb};
      for (int64_t s = 0; s < n_slabs; ++s) {
        const int64_t sr0 = r0 + s * kSlabRows;
        const int64_t valid = std::min(kSlabRows, r1 - sr0);
        float* c = y + t0 * w.rows + sr0;
        if (valid == kSlabRows) {
          kTiles[m - 1](packed + s * slab_stride, nbk, at, c, w.rows, kb0 > 0);
          continue;
        }
        for (int i = 0; i < m; ++i) {
          std::memset(tmp + i * kSlabRows, 0, sizeof(float) * kSlabRows);
          if (kb0 > 0) std::memcpy(tmp + i * kSlabRows, c + i * w.rows, valid * sizeof(float));
        }
        kTiles[m - 1](packed + s * slab_stride, nbk, at, tmp, kSlabRows, kb0 > 0);
        for (int i = 0; i < m; ++i) std::memcpy(c + i * w.rows, tmp + i * kSlabRows, valid * sizeof(float));
      }
    }
  }
}
#else
#define TARMAC_MMQ6K_X86 0
#endif

}  // namespace

bool MatMulQ6KAvailable() { return TARMAC_MMQ6K_X86 && Cpu().x86 && IsaAtLeast(Isa::kAvx2); }

void MatMulQ6K(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  CheckShape(w, n_tokens);
  TARMAC_CHECK(MatMulQ6KAvailable());
  if (n_tokens == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
#if TARMAC_MMQ6K_X86
  const int64_t K = w.cols, nb = K / kQB, ldq = (K + 63) / 64 * 64;
  const int threads = pool ? pool->num_threads() : 1;
  // Per token: q (ldq bytes), dx, corr and s (nb each, 4 bytes; corr and s unread here), bias
  // (2·nb int32). One buffer per calling thread, reused across calls.
  thread_local AlignedBuffer act_buf;
  const size_t need = static_cast<size_t>(n_tokens * (ldq + 20 * nb));
  if (act_buf.size() < need) act_buf.Resize(need);
  auto* q = act_buf.as<int8_t>();
  auto* dx = reinterpret_cast<float*>(act_buf.data() + n_tokens * ldq);
  auto* corr = reinterpret_cast<int32_t*>(dx + n_tokens * nb);
  auto* sums = reinterpret_cast<float*>(corr + n_tokens * nb);
  auto* bias = reinterpret_cast<int32_t*>(sums + n_tokens * nb);
  auto quant = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      QuantizeActivationsQ8(x + t * K, K, 0, q + t * ldq, dx + t * nb, corr + t * nb, sums + t * nb);
      SubBlockBiases(q + t * ldq, nb, bias + t * nb * 2);
    }
  };
  if (threads == 1 || n_tokens * K < 16384) {
    quant(0, n_tokens, 0);
  } else {
    pool->ParallelFor(n_tokens, std::max<int64_t>(1, n_tokens / (4 * threads)), quant);
  }
  const Acts acts{q, ldq, dx, bias, nb};
  const int64_t block = GemmRowBlock(w.rows, kSlabRows, threads);
  const int64_t n_blocks = (w.rows + block - 1) / block;
  auto run = [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b) Rows(w, acts, n_tokens, y, b * block, std::min(w.rows, (b + 1) * block));
  };
  if (threads == 1 || n_blocks == 1) {
    run(0, n_blocks, 0);
  } else {
    pool->ParallelFor(n_blocks, 1, run);
  }
#endif
}

void MatMulQ6KRef(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  CheckShape(w, n_tokens);
  const int64_t K = w.cols, nb = K / kQB;
  std::vector<int8_t> q(K);
  std::vector<float> dx(nb);
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeActivationsQ8Ref(x + t * K, K, q.data(), dx.data());
    for (int64_t r = 0; r < w.rows; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(w.row(r));
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ6_K& sb = blk[b / kSuperBlocks];
        const int c = static_cast<int>(b % kSuperBlocks);
        int32_t isum = 0;
        for (int s = 0; s < 2; ++s) {
          int32_t sub = 0;
          for (int e = 32 * c + 16 * s; e < 32 * c + 16 * s + 16; ++e)
            sub += (Q6KQuant(sb, e) - 32) * q[kQK_K * (b / kSuperBlocks) + e];
          isum += sb.scales[2 * c + s] * sub;
        }
        acc = std::fma(static_cast<float>(isum), F16ToF32(sb.d) * dx[b], acc);
      }
      y[t * w.rows + r] = acc;
    }
  }
}

}  // namespace tarmac::kernels
