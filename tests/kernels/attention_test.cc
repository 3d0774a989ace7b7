#include "kernels/attention.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/fp16.h"

namespace tarmac::kernels {
namespace {

// Sweeps head counts (MHA and GQA), head dims (incl. ones that are not a multiple of the
// vector length), block sizes, context lengths (partial last blocks, a single token) and query
// tile sizes, with scattered block tables. Every query token of a tile must match the
// materialised double-precision reference for its own causal length within
// 1e-5 · max|V| (f32 accumulation over <= 200 keys).
TEST(AttentionTest, TilesMatchReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Shape { int n_heads, n_kv, head_dim, block_size; };
  for (Shape sh : {Shape{1, 1, 8, 4}, Shape{6, 2, 64, 16}, Shape{8, 8, 32, 16},
                   Shape{4, 1, 128, 32}, Shape{9, 3, 64, 16}, Shape{2, 1, 40, 16},
                   Shape{3, 3, 20, 8}, Shape{8, 2, 64, 16}, Shape{4, 2, 64, 16},
                   Shape{5, 5, 64, 16}}) {  // group 4, 2, 1 at head dim 64 (decode fast path)
    const int n_blocks_total = 16;
    const int64_t per_block = static_cast<int64_t>(sh.n_kv) * sh.block_size * sh.head_dim;
    std::vector<uint16_t> k(per_block * n_blocks_total), v(per_block * n_blocks_total);
    for (auto& x : k) x = F32ToF16(nd(rng));
    for (auto& x : v) x = F32ToF16(nd(rng) * 3.0f);
    std::vector<int32_t> table;
    for (int64_t b = 0; b < n_blocks_total; ++b) table.push_back(static_cast<int32_t>((b * 7 + 3) % n_blocks_total));
    PagedKvView view{k.data(), v.data(), sh.n_kv, sh.block_size, sh.head_dim};
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
    const int64_t capacity = static_cast<int64_t>(n_blocks_total) * sh.block_size;
    const int64_t hd_all = static_cast<int64_t>(sh.n_heads) * sh.head_dim;
    // 63 and 240: tiles across a 64-key chunk boundary and ending on one (chunks of 4
    // blocks of 16, 2 of 32).
    for (int64_t pos0 : {0, 2, 15, 16, 49, 63, 129, 240}) {
      for (int32_t nq : {1, 3, 16}) {
        if (pos0 + nq > capacity) continue;
        std::vector<float> q(nq * hd_all), got(nq * hd_all, -7.0f), want(hd_all);
        for (auto& x : q) x = nd(rng) * 2.0f;
        for (int32_t kvh = 0; kvh < sh.n_kv; ++kvh)
          PagedAttentionTile(q.data(), hd_all, nq, pos0, sh.n_heads, kvh, view, table.data(),
                             scale, got.data(), hd_all);
        for (int32_t i = 0; i < nq; ++i) {
          PagedAttentionRef(q.data() + i * hd_all, sh.n_heads, view, table.data(), pos0 + i + 1,
                            scale, want.data());
          for (int64_t e = 0; e < hd_all; ++e)
            ASSERT_NEAR(got[i * hd_all + e], want[e], 1e-5 * 12)
                << "heads " << sh.n_heads << "/" << sh.n_kv << " hd " << sh.head_dim << " pos0 "
                << pos0 << " nq " << nq << " token " << i << " elem " << e;
        }
      }
    }
  }
}

// A tile of n tokens gives the same result as n single-token calls (the decode path).
TEST(AttentionTest, TileEqualsSingleTokens) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n_heads = 6, n_kv = 2, hd = 64, bs = 16, nb = 8;
  std::vector<uint16_t> k(nb * n_kv * bs * hd), v(k.size());
  for (auto& x : k) x = F32ToF16(nd(rng));
  for (auto& x : v) x = F32ToF16(nd(rng));
  std::vector<int32_t> table = {3, 0, 7, 1, 6, 2, 5, 4};
  PagedKvView view{k.data(), v.data(), n_kv, bs, hd};
  const int nq = 16, pos0 = 40, stride = n_heads * hd;
  std::vector<float> q(nq * stride), tile(q.size()), single(q.size());
  for (auto& x : q) x = nd(rng);
  for (int g = 0; g < n_kv; ++g)
    PagedAttentionTile(q.data(), stride, nq, pos0, n_heads, g, view, table.data(), 0.125f, tile.data(), stride);
  for (int i = 0; i < nq; ++i)
    for (int g = 0; g < n_kv; ++g)
      PagedAttentionTile(q.data() + i * stride, stride, 1, pos0 + i, n_heads, g, view, table.data(), 0.125f,
                         single.data() + i * stride, stride);
  for (size_t e = 0; e < q.size(); ++e) ASSERT_NEAR(tile[e], single[e], 1e-6) << e;
}

// int8 K/V with per-(block, head) scales: the tile kernel matches the reference reading the
// same int8 values (the quantization error itself is judged by perplexity in tests/model).
TEST(AttentionTest, Int8TilesMatchReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> qd(-127, 127);
  const int n_heads = 8, n_kv = 2, hd = 64, bs = 16, nb = 6;
  std::vector<int8_t> k(nb * n_kv * bs * hd), v(k.size());
  for (auto& x : k) x = static_cast<int8_t>(qd(rng));
  for (auto& x : v) x = static_cast<int8_t>(qd(rng));
  std::vector<float> ks(nb * n_kv), vs(nb * n_kv);
  for (auto& x : ks) x = 0.02f + 0.01f * std::abs(nd(rng));
  for (auto& x : vs) x = 0.05f + 0.01f * std::abs(nd(rng));
  std::vector<int32_t> table = {4, 1, 5, 0, 3, 2};
  PagedKvView view;
  view.k8 = k.data();
  view.v8 = v.data();
  view.k_scale = ks.data();
  view.v_scale = vs.data();
  view.n_kv_heads = n_kv;
  view.block_size = bs;
  view.head_dim = hd;
  const int stride = n_heads * hd;
  for (int pos0 : {0, 17, 70}) {
    const int nq = 9;
    std::vector<float> q(nq * stride), got(q.size()), want(stride);
    for (auto& x : q) x = nd(rng);
    for (int g = 0; g < n_kv; ++g)
      PagedAttentionTile(q.data(), stride, nq, pos0, n_heads, g, view, table.data(), 0.125f,
                         got.data(), stride);
    for (int i = 0; i < nq; ++i) {
      PagedAttentionRef(q.data() + i * stride, n_heads, view, table.data(), pos0 + i + 1, 0.125f,
                        want.data());
      for (int e = 0; e < stride; ++e) ASSERT_NEAR(got[i * stride + e], want[e], 1e-5 * 7) << e;
    }
  }
}

}  // namespace
}  // namespace tarmac::kernels
