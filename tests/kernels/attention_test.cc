#include "kernels/attention.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/fp16.h"

namespace tarmac::kernels {
namespace {

// Sweeps head counts (MHA and GQA), head dims, block sizes and context lengths (partial last
// blocks, a single token) with scattered block tables; the tiled online-softmax kernel must
// match the materialised double-precision reference within 1e-5 relative to max |V|.
TEST(AttentionTest, MatchesReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Shape { int n_heads, n_kv, head_dim, block_size; };
  for (Shape sh : {Shape{1, 1, 8, 4}, Shape{6, 2, 64, 16}, Shape{8, 8, 32, 16}, Shape{4, 1, 128, 32},
                   Shape{9, 3, 64, 16}}) {
    for (int64_t n_ctx : {1, 3, 16, 17, 50, 130}) {
      const int n_blocks_total = 16;
      const int64_t need = (n_ctx + sh.block_size - 1) / sh.block_size;
      if (need > n_blocks_total) continue;
      const int64_t per_block = static_cast<int64_t>(sh.n_kv) * sh.block_size * sh.head_dim;
      std::vector<uint16_t> k(per_block * n_blocks_total), v(per_block * n_blocks_total);
      for (auto& x : k) x = F32ToF16(nd(rng));
      for (auto& x : v) x = F32ToF16(nd(rng) * 3.0f);
      std::vector<int32_t> table;
      for (int64_t b = 0; b < need; ++b) table.push_back(static_cast<int32_t>((b * 7 + 3) % n_blocks_total));
      std::vector<float> q(static_cast<size_t>(sh.n_heads) * sh.head_dim);
      for (auto& x : q) x = nd(rng) * 2.0f;
      PagedKvView view{k.data(), v.data(), sh.n_kv, sh.block_size, sh.head_dim};
      const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
      std::vector<float> got(q.size()), want(q.size());
      PagedAttentionRef(q.data(), sh.n_heads, view, table.data(), n_ctx, scale, want.data());
      // Whole range at once, and split into per-head calls as the model's thread split does.
      PagedAttention(q.data(), sh.n_heads, 0, sh.n_heads, view, table.data(), n_ctx, scale, got.data());
      for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(got[i], want[i], 3e-5 * 12) << i;
      std::vector<float> split(q.size(), -1.0f);
      for (int h = 0; h < sh.n_heads; ++h)
        PagedAttention(q.data(), sh.n_heads, h, h + 1, view, table.data(), n_ctx, scale, split.data());
      EXPECT_EQ(split, got);
    }
  }
}

}  // namespace
}  // namespace tarmac::kernels
