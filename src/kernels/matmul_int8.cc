// Int8 activation × Q8_0/Q4_0/Q4_K weight GEMM (see matmul_int8.h for the scheme and numerics).
// The scalar path (plain C++, runs everywhere, and the reference's building blocks) and the
// driver; the x86 paths are in matmul_int8_x86.cc.

#include "kernels/matmul_int8.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_int8_amx.h"
#include "kernels/matmul_int8_paths.h"
#include "kernels/quant_interleaved.h"
#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tarmac::kernels {

using namespace int8_internal;  // NOLINT(build/namespaces): the paths this file drives

namespace int8_internal {

void QuantizeRowScalar(const float* x, int64_t n, int offset, int8_t* q, float* d,
                       int32_t* corr, float* s) {
  for (int64_t b = 0; b < n / kQB; ++b) {
    const float* xb = x + b * kQB;
    float amax = 0.0f;
    bool finite = true;
    for (int k = 0; k < kQB; ++k) {
      finite = finite && std::isfinite(xb[k]);
      amax = std::max(amax, std::fabs(xb[k]));
    }
    int32_t sum = 0;
    if (!finite) {
      d[b] = std::numeric_limits<float>::quiet_NaN();
      std::memset(q + b * kQB, 0, kQB);
    } else if (amax < kTinyAmax) {
      d[b] = 0.0f;
      std::memset(q + b * kQB, 0, kQB);
    } else {
      const float db = amax / 127.0f;
      const float id = 1.0f / db;
      d[b] = db;
      for (int k = 0; k < kQB; ++k) {
        const float r = std::nearbyint(xb[k] * id);  // default rounding: to nearest even
        const int v = static_cast<int>(std::clamp(r, -127.0f, 127.0f));
        q[b * kQB + k] = static_cast<int8_t>(v);
        sum += v;
      }
    }
    corr[b] = -offset * sum;
    s[b] = d[b] * static_cast<float>(sum);
  }
}

// Decodes block b of a Q8_0/Q4_0/Q4_K row to unsigned bytes u = w + offset, and its scale.
// Q4_K: block b is sub-block b % 8 of super-block b / 8; value = scale · u - *min.
inline float DecodeBlockU8(DType t, const uint8_t* row, int64_t b, uint8_t* u, float* min) {
  *min = 0.0f;
  if (t == DType::kQ4_K) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + b / 8;
    const int j = static_cast<int>(b % 8);
    const uint8_t* q = blk->qs + 32 * (j / 2);
    for (int k = 0; k < kQB; ++k) u[k] = (j % 2 == 0) ? (q[k] & 15) : (q[k] >> 4);
    uint8_t sc, m;
    Q4KScaleMin(j, blk->scales, &sc, &m);
    *min = F16ToF32(blk->dmin) * m;  // exact: 11-bit × 6-bit significands
    return F16ToF32(blk->d) * sc;
  }
  if (t == DType::kQ8_0) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(row) + b;
    for (int k = 0; k < kQB; ++k) u[k] = static_cast<uint8_t>(blk->qs[k]) ^ 0x80u;
    return F16ToF32(blk->d);
  }
  const auto* blk = reinterpret_cast<const BlockQ4_0*>(row) + b;
  for (int j = 0; j < kQB / 2; ++j) {
    u[j] = blk->qs[j] & 15;
    u[j + kQB / 2] = blk->qs[j] >> 4;
  }
  return F16ToF32(blk->d);
}

// Packs rows [r0, r0 + nrows) (nrows <= 16; missing rows zero with scale 0), blocks
// [b0, b0 + nbk) into one slab.
void PackSlabScalar(const MatrixView& w, int64_t r0, int64_t nrows, int64_t b0, int64_t nbk,
                    uint8_t* dst) {
  uint8_t u[kQB];
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* db = dst + b * kBlockBytes;
    for (int64_t i = 0; i < kSlabRows; ++i) {
      float s = 0.0f, mn = 0.0f;
      if (i < nrows) {
        s = DecodeBlockU8(w.type, w.row(r0 + i), b0 + b, u, &mn);
      } else {
        std::memset(u, 0, sizeof(u));
      }
      for (int k = 0; k < kQB; ++k) db[(k / 4) * 64 + i * 4 + (k % 4)] = u[k];
      std::memcpy(db + kQuantBytes + 4 * i, &s, 4);
      std::memcpy(db + kMinsOff + 4 * i, &mn, 4);
    }
  }
}

// The slab of row group g (rows 16g .. 16g+15), blocks [b0, b0 + nbk), from a QuantInterleaved
// copy: its quant bytes are already [4-column group][16 rows][4] (Q8_0 as w + 128, Q4_0 / Q4_K
// as nibble pairs whose low/high halves are column groups s and s + 4), so this is a copy plus
// the scale conversion (Q4_K: and the mins).
void PackSlabInterleaved(const QuantInterleaved& pk, int64_t g, int64_t b0, int64_t nbk,
                         uint8_t* dst) {
  for (int64_t b = 0; b < nbk; ++b) {
    uint8_t* db = dst + b * kBlockBytes;
    const uint8_t* q = pk.block_quants(g, b0 + b);
    if (pk.type() == DType::kQ8_0) {
      std::memcpy(db, q, kQuantBytes);
    } else {
      for (int64_t j = 0; j < 256; ++j) {
        db[j] = q[j] & 15;
        db[256 + j] = q[j] >> 4;
      }
    }
    if (pk.type() == DType::kQ4_K) {
      PackSlabScalesMinsQ4_K(pk, g, b0 + b, db);
      continue;
    }
    const uint16_t* sc = pk.block_scales(g, b0 + b);
    for (int64_t i = 0; i < kSlabRows; ++i) {
      const float s = F16ToF32(sc[i]);
      std::memcpy(db + kQuantBytes + 4 * i, &s, 4);
    }
    std::memset(db + kMinsOff, 0, kSlabRows * 4);
  }
}

void PackSlabScalesMinsQ4_K(const QuantInterleaved& pk, int64_t g, int64_t b, uint8_t* db) {
  for (int64_t i = 0; i < kSlabRows; ++i) {
    float s, mn;
    pk.block_scale_min(g, b, i, &s, &mn);
    std::memcpy(db + kQuantBytes + 4 * i, &s, 4);
    std::memcpy(db + kMinsOff + 4 * i, &mn, 4);
  }
}

void PackSlabFullScalar(const MatrixView& w, int64_t r0, int64_t b0, int64_t nbk, uint8_t* dst) {
  PackSlabScalar(w, r0, kSlabRows, b0, nbk, dst);
}

template <int M, bool kMins>
void TileScalar(const uint8_t* wp, int64_t /*slab_stride*/, int64_t nbk, const int8_t* xq,
                int64_t ldx, const float* xd, const int32_t* xc, const float* xs, int64_t ldb,
                int /*offset*/, float* c, int64_t ldc, bool load_c) {
  for (int m = 0; m < M; ++m) {
    for (int i = 0; i < kSlabRows; ++i) {
      float acc = load_c ? c[m * ldc + i] : 0.0f;
      for (int64_t b = 0; b < nbk; ++b) {
        const uint8_t* wb = wp + b * kBlockBytes;
        const int8_t* xb = xq + m * ldx + b * kQB;
        int32_t isum = xc[m * ldb + b];
        for (int k = 0; k < kQB; ++k) isum += int32_t{wb[(k / 4) * 64 + i * 4 + (k % 4)]} * xb[k];
        float dw;
        std::memcpy(&dw, wb + kQuantBytes + 4 * i, 4);
        acc = std::fma(static_cast<float>(isum), dw * xd[m * ldb + b], acc);
        if (kMins) {
          float mn;
          std::memcpy(&mn, wb + kMinsOff + 4 * i, 4);
          acc = std::fma(-mn, xs[m * ldb + b], acc);
        }
      }
      c[m * ldc + i] = acc;
    }
  }
}

constexpr int kScalarMR = 4;
constexpr TileFn kScalarTiles[kScalarMR] = {&TileScalar<1, false>, &TileScalar<2, false>,
                                            &TileScalar<3, false>, &TileScalar<4, false>};
constexpr TileFn kScalarTilesMins[kScalarMR] = {&TileScalar<1, true>, &TileScalar<2, true>,
                                                &TileScalar<3, true>, &TileScalar<4, true>};
constexpr Path kScalarPath{"scalar", kScalarMR, 1, kScalarTiles, kScalarTilesMins,
                           &QuantizeRowScalar, &PackSlabFullScalar, &PackSlabInterleaved};

}  // namespace int8_internal

namespace {

// K chunk in 32-blocks: a slab chunk is 16 × 640 = 10 KiB, an MR-token slice of x 6 × 512 B.
// A multiple of 8 so that chunks start at Q4_K super-blocks.
constexpr int64_t kKCB = 16;

// Quantized activations of all tokens: q [t][K]; d, corr and s = d · sum_b q [t][K/32].
struct Acts {
  const int8_t* q;
  const float* d;
  const int32_t* corr;
  const float* s;
  int64_t K;
  int64_t nb;
};

const Path& SelectPath() {
  if (const Path* p = BestX86Path(ActiveIsa())) return *p;
  return kScalarPath;
}

// y[t][r] for all tokens, rows [r0, r1).
void MatMulRowsInt8(const Path& path, const MatrixView& w, const Acts& a, int64_t n_tokens,
                    float* y, int64_t r0, int64_t r1) {
  const int64_t NR = kSlabRows * path.nv;
  const int64_t n_panels = (r1 - r0 + NR - 1) / NR;
  const int64_t n_slabs = n_panels * path.nv;
  const int64_t slab_stride = kKCB * kBlockBytes;
  const int offset = WeightOffset(w.type);
  thread_local AlignedBuffer scratch;
  const size_t need = static_cast<size_t>(n_slabs * slab_stride);
  if (scratch.size() < need) scratch.Resize(need);
  uint8_t* packed = scratch.data();
  const bool gather_ok = w.row_stride <= (int64_t{1} << 31) / 16;
  alignas(64) float tmp[16 * 64];  // edge tile: up to 16 tokens × 64 rows
  TARMAC_DCHECK(path.mr <= 16 && NR <= 64);
  if (path.begin != nullptr) path.begin();
  for (int64_t kb0 = 0; kb0 < a.nb; kb0 += kKCB) {
    const int64_t nbk = std::min(kKCB, a.nb - kb0);
    for (int64_t s = 0; s < n_slabs; ++s) {
      const int64_t sr0 = r0 + s * kSlabRows;
      const int64_t nrows = std::clamp<int64_t>(r1 - sr0, 0, kSlabRows);
      uint8_t* dst = packed + s * slab_stride;
      TARMAC_DCHECK(sr0 % kSlabRows == 0);
      if (const QuantInterleaved* copy = PreparedAs<QuantInterleaved>(w); copy != nullptr && nrows > 0) {
        // The interleaved decode copy (its rows past w.rows are zero, as a partial slab needs).
        path.pack_interleaved(*copy, sr0 / kSlabRows,
                              kb0, nbk, dst);
      } else if (nrows == kSlabRows && gather_ok) {
        path.pack_full(w, sr0, kb0, nbk, dst);
      } else {
        PackSlabScalar(w, sr0, nrows, kb0, nbk, dst);
      }
      if (path.sign_slabs != nullptr && offset != 0) path.sign_slabs(dst, nbk, offset);
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += path.mr) {
      const int m = static_cast<int>(std::min<int64_t>(path.mr, n_tokens - t0));
      const TileFn tile = (w.type == DType::kQ4_K ? path.tiles_mins : path.tiles)[m - 1];
      const int8_t* xq = a.q + t0 * a.K + kb0 * kQB;
      const int64_t ao = path.acts_by_group ? (t0 / path.mr * a.nb + kb0) * path.mr
                                            : t0 * a.nb + kb0;
      const float* xd = a.d + ao;
      const int32_t* xc = a.corr + ao;
      const float* xs = a.s + ao;
      for (int64_t p = 0; p < n_panels; ++p) {
        const int64_t pr0 = r0 + p * NR;
        const int64_t valid = std::min(NR, r1 - pr0);
        const uint8_t* wp = packed + p * path.nv * slab_stride;
        float* c = y + t0 * w.rows + pr0;
        if (valid == NR) {
          tile(wp, slab_stride, nbk, xq, a.K, xd, xc, xs, a.nb, offset, c, w.rows, kb0 > 0);
        } else {
          for (int i = 0; i < m; ++i) {
            std::memset(tmp + i * NR, 0, NR * sizeof(float));
            if (kb0 > 0) std::memcpy(tmp + i * NR, c + i * w.rows, valid * sizeof(float));
          }
          tile(wp, slab_stride, nbk, xq, a.K, xd, xc, xs, a.nb, offset, tmp, NR, kb0 > 0);
          for (int i = 0; i < m; ++i) std::memcpy(c + i * w.rows, tmp + i * NR, valid * sizeof(float));
        }
      }
    }
  }
  if (path.end != nullptr) path.end();
}

}  // namespace

bool IsInt8MatMulType(DType type) {
  return type == DType::kQ8_0 || type == DType::kQ4_0 || type == DType::kQ4_K;
}

int WeightOffset(DType t) { return t == DType::kQ8_0 ? 128 : t == DType::kQ4_0 ? 8 : 0; }

const char* Int8MatMulPath() { return SelectPath().name; }

void QuantizeActivationsQ8Ref(const float* x, int64_t n, int8_t* q, float* d) {
  TARMAC_CHECK(n % kQB == 0);
  std::vector<int32_t> corr(n / kQB);
  std::vector<float> s(n / kQB);
  QuantizeRowScalar(x, n, 0, q, d, corr.data(), s.data());
}

void QuantizeActivationsQ8(const float* x, int64_t n, int offset, int8_t* q, float* d,
                           int32_t* corr, float* s) {
  TARMAC_CHECK(n % kQB == 0);
  SelectPath().quant(x, n, offset, q, d, corr, s);
}

void MatMulInt8(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  TARMAC_CHECK(IsInt8MatMulType(w.type));
  TARMAC_CHECK(n_tokens >= 0 && w.rows >= 0 && w.cols >= 0 &&
               w.cols % Traits(w.type).block_size == 0);
  TARMAC_CHECK(w.rows <= 1 || w.row_stride >= RowBytes(w.type, w.cols));
  if (n_tokens == 0 || w.rows == 0) return;
  if (w.cols == 0) {
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
  const Path& path = SelectPath();
  const int64_t K = w.cols, nb = K / kQB;
  const int offset = WeightOffset(w.type);
  const int threads = pool ? pool->num_threads() : 1;

  // Quantized activations: one buffer per calling thread, reused across calls.
  thread_local AlignedBuffer act_buf;
  // Whole groups of mr token rows when the tiles read them (the padding rows are zero).
  const int64_t q_rows = path.pad_tokens ? (n_tokens + path.mr - 1) / path.mr * path.mr : n_tokens;
  const int64_t q_bytes = (q_rows * K + 63) / 64 * 64;
  // d/corr/s, then (acts_by_group) their copies in group layout.
  const int64_t groups = (n_tokens + path.mr - 1) / path.mr;
  const int64_t by_group = path.acts_by_group ? groups * path.mr * nb : 0;
  const size_t need = static_cast<size_t>(q_bytes + (n_tokens * nb + by_group) * 12);
  if (act_buf.size() < need) act_buf.Resize(need);
  auto* q = act_buf.as<int8_t>();
  auto* d = reinterpret_cast<float*>(act_buf.data() + q_bytes);
  auto* corr = reinterpret_cast<int32_t*>(d + n_tokens * nb);
  auto* sums = reinterpret_cast<float*>(corr + n_tokens * nb);
  if (q_rows > n_tokens) std::memset(q + n_tokens * K, 0, (q_rows - n_tokens) * K);
  auto quant = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t)
      path.quant(x + t * K, K, offset, q + t * K, d + t * nb, corr + t * nb, sums + t * nb);
  };
  if (threads == 1 || n_tokens * K < 16384) {
    quant(0, n_tokens, 0);
  } else {
    pool->ParallelFor(n_tokens, std::max<int64_t>(1, n_tokens / (4 * threads)), quant);
  }
  Acts acts{q, d, corr, sums, K, nb};
  if (path.acts_by_group) {
    auto* gd = sums + n_tokens * nb;
    auto* gc = reinterpret_cast<int32_t*>(gd + by_group);
    auto* gs = reinterpret_cast<float*>(gc + by_group);
    const int64_t mr = path.mr;
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t b = 0; b < nb; ++b) {
        for (int64_t i = 0; i < mr; ++i) {
          const int64_t t = g * mr + i, o = (g * nb + b) * mr + i;
          const bool live = t < n_tokens;
          gd[o] = live ? d[t * nb + b] : 0.0f;
          gc[o] = live ? corr[t * nb + b] : 0;
          gs[o] = live ? sums[t * nb + b] : 0.0f;
        }
      }
    }
    acts = Acts{q, gd, gc, gs, K, nb};
  }

  const int64_t block = GemmRowBlock(w.rows, kSlabRows * path.nv, threads);
  const int64_t n_blocks = (w.rows + block - 1) / block;
  auto run = [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b)
      MatMulRowsInt8(path, w, acts, n_tokens, y, b * block, std::min(w.rows, (b + 1) * block));
  };
  if (threads == 1 || n_blocks == 1) {
    run(0, n_blocks, 0);
  } else {
    pool->ParallelFor(n_blocks, 1, run);
  }
}

void MatMulInt8Ref(const MatrixView& w, const float* x, int64_t n_tokens, float* y) {
  TARMAC_CHECK(IsInt8MatMulType(w.type) && w.cols % Traits(w.type).block_size == 0);
  const int64_t K = w.cols, nb = K / kQB;
  std::vector<int8_t> q(n_tokens * K);
  std::vector<float> d(n_tokens * nb);
  for (int64_t t = 0; t < n_tokens; ++t) QuantizeActivationsQ8Ref(x + t * K, K, &q[t * K], &d[t * nb]);
  const int offset = WeightOffset(w.type);
  std::vector<int> wq(K);
  std::vector<float> wd(nb), wm(nb);
  uint8_t u[kQB];
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      wd[b] = DecodeBlockU8(w.type, w.row(r), b, u, &wm[b]);
      for (int k = 0; k < kQB; ++k) wq[b * kQB + k] = int{u[k]} - offset;
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t isum = 0;
        for (int k = 0; k < kQB; ++k) isum += wq[b * kQB + k] * q[t * K + b * kQB + k];
        acc = std::fma(static_cast<float>(isum), wd[b] * d[t * nb + b], acc);
        if (w.type == DType::kQ4_K) {  // - min · sum_k x_k, with sum_k x_k ≈ d · sum_k q_k
          int32_t qsum = 0;
          for (int k = 0; k < kQB; ++k) qsum += q[t * K + b * kQB + k];
          acc = std::fma(-wm[b], d[t * nb + b] * static_cast<float>(qsum), acc);
        }
      }
      y[t * w.rows + r] = acc;
    }
  }
}

}  // namespace tarmac::kernels
