#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/ops.h"
#include "tensor/fp16.h"

namespace tarmac::kernels {

void PagedAttention(const float* q, int32_t n_heads, int32_t head_begin, int32_t head_end,
                    const PagedKvView& kv, const int32_t* block_table, int64_t n_ctx,
                    float scale, float* out) {
  TARMAC_DCHECK(n_ctx >= 1 && kv.n_kv_heads > 0 && n_heads % kv.n_kv_heads == 0);
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  TARMAC_CHECK(hd <= 512 && bs <= 256);
  const int32_t group = n_heads / kv.n_kv_heads;
  // Tiles of one block, converted to f32 once and shared by the query heads of a group.
  alignas(64) float k_tile[256 * 512 / 16];  // block_size * head_dim <= 8192 floats
  alignas(64) float v_tile[256 * 512 / 16];
  TARMAC_CHECK(static_cast<int64_t>(bs) * hd <= 8192);
  constexpr int32_t kMaxGroup = 64;
  TARMAC_CHECK(group <= kMaxGroup);
  float m[kMaxGroup], l[kMaxGroup], scores[256];

  const int64_t n_blocks = (n_ctx + bs - 1) / bs;
  for (int32_t kvh = head_begin / group; kvh * group < head_end; ++kvh) {
    const int32_t h0 = std::max(head_begin, kvh * group);
    const int32_t h1 = std::min(head_end, (kvh + 1) * group);
    for (int32_t h = h0; h < h1; ++h) {
      m[h - h0] = -std::numeric_limits<float>::infinity();
      l[h - h0] = 0.0f;
      std::fill(out + static_cast<int64_t>(h) * hd, out + static_cast<int64_t>(h + 1) * hd, 0.0f);
    }
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int32_t block = block_table[b];
      const int32_t rows = static_cast<int32_t>(std::min<int64_t>(bs, n_ctx - b * bs));
      ConvertF16ToF32(kv.KRows(block, kvh), k_tile, static_cast<int64_t>(rows) * hd);
      ConvertF16ToF32(kv.VRows(block, kvh), v_tile, static_cast<int64_t>(rows) * hd);
      for (int32_t h = h0; h < h1; ++h) {
        const float* qh = q + static_cast<int64_t>(h) * hd;
        float* oh = out + static_cast<int64_t>(h) * hd;
        float tile_max = -std::numeric_limits<float>::infinity();
        for (int32_t j = 0; j < rows; ++j) {
          scores[j] = scale * DotF32(qh, k_tile + static_cast<int64_t>(j) * hd, hd);
          tile_max = std::max(tile_max, scores[j]);
        }
        const float m_old = m[h - h0];
        const float m_new = std::max(m_old, tile_max);
        // Rescale what was accumulated under the old maximum.
        const float corr = std::exp(m_old - m_new);
        if (corr != 1.0f) Scale(oh, corr, oh, hd);
        float sum = 0.0f;
        for (int32_t j = 0; j < rows; ++j) {
          const float p = std::exp(scores[j] - m_new);
          sum += p;
          Axpy(p, v_tile + static_cast<int64_t>(j) * hd, oh, hd);
        }
        l[h - h0] = l[h - h0] * corr + sum;
        m[h - h0] = m_new;
      }
    }
    for (int32_t h = h0; h < h1; ++h) {
      float* oh = out + static_cast<int64_t>(h) * hd;
      Scale(oh, 1.0f / l[h - h0], oh, hd);
    }
  }
}

void PagedAttentionRef(const float* q, int32_t n_heads, const PagedKvView& kv,
                       const int32_t* block_table, int64_t n_ctx, float scale, float* out) {
  const int32_t hd = kv.head_dim, bs = kv.block_size;
  const int32_t group = n_heads / kv.n_kv_heads;
  std::vector<double> s(n_ctx);
  for (int32_t h = 0; h < n_heads; ++h) {
    const int32_t kvh = h / group;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n_ctx; ++j) {
      const uint16_t* k = kv.KRows(block_table[j / bs], kvh) + (j % bs) * hd;
      double d = 0;
      for (int32_t i = 0; i < hd; ++i) d += static_cast<double>(q[h * hd + i]) * F16ToF32(k[i]);
      s[j] = scale * d;
      mx = std::max(mx, s[j]);
    }
    double z = 0;
    for (int64_t j = 0; j < n_ctx; ++j) z += (s[j] = std::exp(s[j] - mx));
    for (int32_t i = 0; i < hd; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < n_ctx; ++j) {
        const uint16_t* v = kv.VRows(block_table[j / bs], kvh) + (j % bs) * hd;
        acc += s[j] / z * F16ToF32(v[i]);
      }
      out[h * hd + i] = static_cast<float>(acc);
    }
  }
}

}  // namespace tarmac::kernels
