#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kernels/attention_amx.h"
#include "kernels/matmul_amx.h"
#include "tensor/fp16.h"

namespace tarmac::kernels {
namespace {

using testing::AmxSwitch;

// Sweeps head counts (MHA and GQA), head dims (incl. ones that are not a multiple of the
// vector length), block sizes, context lengths (partial last blocks, a single token) and query
// tile sizes, with scattered block tables. Every query token of a tile must match the
// materialised double-precision reference for its own causal length within
// 1e-5 · max|V| (f32 accumulation over <= 200 keys). The Highway paths at every target (AMX
// off: its tiles are tested below with their own bound).
TEST(AttentionTest, TilesMatchReference) {
  const AmxSwitch no_amx(false);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Shape { int n_heads, n_kv, head_dim, block_size; };
  testing::ForEachTarget([&](const char* target) {
  SCOPED_TRACE(target);
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
  });
}

// Sliding windows and soft-capped scores, on every path (decode fast path, the general tiles,
// AMX tiles where the CPU has them) against the reference with the same variant. The blocks
// wholly before the tile's first visible key point at a block of NaN: reading one (instead
// of skipping it) fails. Windows: 1 (a token sees itself only), shorter than a block, across
// blocks and chunks, longer than the context (no effect). Bounds as in the tests above; with
// AMX the split-bf16 products add up to ~2^-14 of the scores (softcap only shrinks them).
void CheckVariantsAtThisLevel(bool amx) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Shape { int n_heads, n_kv, head_dim, block_size; };
  int checked = 0;
  for (Shape sh : {Shape{6, 2, 64, 16}, Shape{8, 8, 32, 16}, Shape{4, 1, 128, 32},
                   Shape{3, 3, 20, 8}, Shape{8, 2, 64, 16}, Shape{4, 4, 64, 16}}) {
    const int n_blocks = 20;  // block n_blocks - 1 holds NaN
    const int64_t per_block = static_cast<int64_t>(sh.n_kv) * sh.block_size * sh.head_dim;
    std::vector<uint16_t> k(per_block * n_blocks), v(per_block * n_blocks);
    for (auto& x : k) x = F32ToF16(nd(rng));
    for (auto& x : v) x = F32ToF16(nd(rng) * 3.0f);
    for (int64_t e = per_block * (n_blocks - 1); e < per_block * n_blocks; ++e) k[e] = v[e] = 0x7E00;
    PagedKvView view{k.data(), v.data(), sh.n_kv, sh.block_size, sh.head_dim};
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
    const int64_t hd_all = static_cast<int64_t>(sh.n_heads) * sh.head_dim;
    const int64_t capacity = static_cast<int64_t>(n_blocks - 1) * sh.block_size;
    // Attention sinks (gpt-oss): logits around the scores' own range, per head.
    std::vector<float> sinks(sh.n_heads);
    for (float& x : sinks) x = nd(rng) * 2.0f;
    for (AttentionVariant var : {AttentionVariant{1, 0.0f}, AttentionVariant{5, 0.0f},
                                 AttentionVariant{37, 0.0f}, AttentionVariant{100, 0.0f},
                                 AttentionVariant{0, 4.0f}, AttentionVariant{0, 50.0f},
                                 AttentionVariant{23, 2.0f}, AttentionVariant{4096, 30.0f},
                                 AttentionVariant{0, 0.0f, sinks.data()},
                                 AttentionVariant{23, 0.0f, sinks.data()}}) {
      for (int64_t pos0 : {0, 3, 16, 70, 129, 200}) {
        for (int32_t nq : {1, 2, 16, 40}) {
          if (pos0 + nq > capacity) continue;
          std::vector<int32_t> table;
          for (int64_t b = 0; b < n_blocks - 1; ++b)
            table.push_back(static_cast<int32_t>((b * 7 + 3) % (n_blocks - 1)));
          for (int64_t b = 0; b < var.FirstKey(pos0) / sh.block_size; ++b) table[b] = n_blocks - 1;
          std::vector<float> q(nq * hd_all), got(nq * hd_all, -7.0f), want(hd_all);
          for (auto& x : q) x = nd(rng) * 2.0f;
          for (int32_t kvh = 0; kvh < sh.n_kv; ++kvh)
            PagedAttentionTile(q.data(), hd_all, nq, pos0, sh.n_heads, kvh, view, table.data(),
                               scale, got.data(), hd_all, var);
          const double tol = amx ? 3e-3 : 1.2e-4;  // max|V| ~ 12
          for (int32_t i = 0; i < nq; ++i) {
            PagedAttentionRef(q.data() + i * hd_all, sh.n_heads, view, table.data(),
                              pos0 + i + 1, scale, want.data(), var);
            for (int64_t e = 0; e < hd_all; ++e)
              ASSERT_NEAR(got[i * hd_all + e], want[e], tol)
                  << "heads " << sh.n_heads << "/" << sh.n_kv << " hd " << sh.head_dim
                  << " window " << var.window << " softcap " << var.softcap
                  << (var.sinks != nullptr ? " sinks" : "") << " pos0 " << pos0
                  << " nq " << nq << " token " << i << " elem " << e;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 200);
}

TEST(AttentionTest, WindowAndSoftCapMatchReference) {
  const AmxSwitch no_amx(false);
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    CheckVariantsAtThisLevel(/*amx=*/false);
  });
}

TEST(AttentionTest, AmxWindowAndSoftCapMatchReference) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const AmxSwitch amx(true);
  CheckVariantsAtThisLevel(/*amx=*/true);
}

// The reference itself: a window as wide as the context changes nothing, a window of 1 returns
// the token's own V, and soft-capping with a huge cap is the plain softmax.
TEST(AttentionTest, ReferenceVariantsKnownValues) {
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n_heads = 2, n_kv = 1, hd = 8, bs = 4, nb = 4;
  std::vector<uint16_t> k(nb * n_kv * bs * hd), v(k.size());
  for (auto& x : k) x = F32ToF16(nd(rng));
  for (auto& x : v) x = F32ToF16(nd(rng));
  const std::vector<int32_t> table = {2, 0, 3, 1};
  PagedKvView view{k.data(), v.data(), n_kv, bs, hd};
  std::vector<float> q(n_heads * hd), plain(q.size()), got(q.size());
  for (auto& x : q) x = nd(rng);
  const int64_t n_ctx = 11;
  PagedAttentionRef(q.data(), n_heads, view, table.data(), n_ctx, 0.3f, plain.data());
  PagedAttentionRef(q.data(), n_heads, view, table.data(), n_ctx, 0.3f, got.data(),
                    AttentionVariant{static_cast<int32_t>(n_ctx), 0.0f});
  EXPECT_EQ(got, plain);
  PagedAttentionRef(q.data(), n_heads, view, table.data(), n_ctx, 0.3f, got.data(),
                    AttentionVariant{0, 1e6f});
  for (size_t e = 0; e < q.size(); ++e) EXPECT_NEAR(got[e], plain[e], 1e-6);
  // A sink adds e^sink to each head's denominator: the output is the plain one times
  // Z / (Z + e^sink), the same factor for every element of a head, in (0, 1); a sink of -inf
  // changes nothing.
  const float sinks[2] = {0.5f, -std::numeric_limits<float>::infinity()};
  PagedAttentionRef(q.data(), n_heads, view, table.data(), n_ctx, 0.3f, got.data(),
                    AttentionVariant{0, 0.0f, sinks});
  const double ratio = got[0] / plain[0];
  EXPECT_GT(ratio, 0.0);
  EXPECT_LT(ratio, 1.0);
  for (int d = 0; d < hd; ++d) EXPECT_NEAR(got[d] / plain[d], ratio, 1e-5);
  for (int d = hd; d < 2 * hd; ++d) EXPECT_NEAR(got[d], plain[d], 1e-6);
  PagedAttentionRef(q.data(), n_heads, view, table.data(), n_ctx, 0.3f, got.data(),
                    AttentionVariant{1, 0.0f});
  const int64_t pos = n_ctx - 1;
  for (int h = 0; h < n_heads; ++h)
    for (int d = 0; d < hd; ++d)
      EXPECT_EQ(got[h * hd + d],
                F16ToF32(v[view.RowOffset(table[pos / bs], 0) + (pos % bs) * hd + d]));
}

// The KV cache is not zeroed (kv_cache.h) and a reused block keeps stale values: positions past
// a tile's last token may hold anything, NaN and infinities included, and must not reach the
// output. f16 and int8 K/V (int8 with NaN scales too), decode and prefill tiles, every level.
TEST(AttentionTest, PositionsPastTheTileAreNeverUsed) {
  const AmxSwitch no_amx(false);
  std::mt19937 rng(29);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n_heads = 8, n_kv = 2, hd = 64, bs = 16, nb = 4;
  const int64_t per_block = static_cast<int64_t>(n_kv) * bs * hd;
  const std::vector<int32_t> table = {2, 0, 3, 1};
  const int stride = n_heads * hd;
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    for (bool int8 : {false, true}) {
      for (int nq : {1, 5, 20}) {
        const int pos0 = 37 - nq;  // the tile ends at position 36, inside block table[2]
        std::vector<uint16_t> k(nb * per_block), v(k.size());
        std::vector<int8_t> k8(k.size()), v8(k.size());
        std::vector<float> ks(nb * n_kv, 0.05f), vs(ks.size(), 0.07f);
        PagedKvView view;
        view.n_kv_heads = n_kv;
        view.block_size = bs;
        view.head_dim = hd;
        if (int8) {
          view.k8 = k8.data(), view.v8 = v8.data(), view.k_scale = ks.data(), view.v_scale = vs.data();
        } else {
          view.k = k.data(), view.v = v.data();
        }
        for (int64_t pos = 0; pos < nb * bs; ++pos) {
          const bool written = pos <= 36;
          const int32_t block = table[pos / bs];
          for (int h = 0; h < n_kv; ++h) {
            const int64_t base = view.RowOffset(block, h);
            for (int d = 0; d < hd; ++d) {
              const int64_t ki = base + d * bs + pos % bs, vi = base + (pos % bs) * hd + d;
              // NaN, +inf, or a large finite value (whose scores would swamp the softmax).
              const uint16_t junk = pos % 3 == 0 ? 0x7E00 : pos % 3 == 1 ? 0x7C00 : F32ToF16(d % 2 ? 6e4f : -6e4f);
              k[ki] = written ? F32ToF16(nd(rng)) : junk;
              v[vi] = written ? F32ToF16(nd(rng)) : junk;
              k8[ki] = written ? static_cast<int8_t>(rng() % 255 - 127) : int8_t{-128};
              v8[vi] = written ? static_cast<int8_t>(rng() % 255 - 127) : int8_t{127};
            }
          }
        }
        // The unused block's scales, and those of blocks no position reaches.
        ks[table[3] * n_kv] = ks[table[3] * n_kv + 1] = NAN;
        vs[table[3] * n_kv] = vs[table[3] * n_kv + 1] = NAN;
        std::vector<float> q(nq * stride), got(q.size(), -7.0f), want(stride);
        for (auto& x : q) x = nd(rng);
        for (int g = 0; g < n_kv; ++g)
          PagedAttentionTile(q.data(), stride, nq, pos0, n_heads, g, view, table.data(), 0.125f,
                             got.data(), stride);
        for (int i = 0; i < nq; ++i) {
          PagedAttentionRef(q.data() + i * stride, n_heads, view, table.data(), pos0 + i + 1,
                            0.125f, want.data());
          for (int e = 0; e < stride; ++e) {
            ASSERT_TRUE(std::isfinite(got[i * stride + e])) << "int8 " << int8 << " nq " << nq;
            ASSERT_NEAR(got[i * stride + e], want[e], 1e-4) << "int8 " << int8 << " nq " << nq;
          }
        }
      }
    }
  });
}

// A query's attention does not depend on the tile it is computed in: a tile of n tokens
// gives, bit for bit, what n single-token calls (decode, or a one-token prefill chunk) give,
// at every Highway target, for head sizes whose single tokens read K/V straight from the
// cache (32, 64, 128) and one that goes through the scratch copy (40), groups 1-4, and a tile
// that spans chunks. Fails if the single-token path sums in another order than the tile.
// (Sliding windows are outside this: a tile's chunks start at its first token's window.)
TEST(AttentionTest, TileEqualsSingleTokens) {
  const AmxSwitch no_amx(false);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Shape { int n_heads, n_kv, hd; };
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    for (Shape sh : {Shape{6, 2, 64}, Shape{4, 4, 64}, Shape{8, 2, 64}, Shape{4, 2, 32},
                     Shape{4, 1, 128}, Shape{2, 1, 40}}) {
      const int bs = 16, nb = 8;
      std::vector<uint16_t> k(nb * sh.n_kv * bs * sh.hd), v(k.size());
      for (auto& x : k) x = F32ToF16(nd(rng));
      for (auto& x : v) x = F32ToF16(nd(rng));
      std::vector<int32_t> table = {3, 0, 7, 1, 6, 2, 5, 4};
      PagedKvView view{k.data(), v.data(), sh.n_kv, bs, sh.hd};
      const int nq = 21, pos0 = 40, stride = sh.n_heads * sh.hd;
      std::vector<float> q(nq * stride), tile(q.size()), single(q.size());
      for (auto& x : q) x = nd(rng);
      for (int g = 0; g < sh.n_kv; ++g) {
        PagedAttentionTile(q.data(), stride, nq, pos0, sh.n_heads, g, view, table.data(), 0.125f,
                           tile.data(), stride);
      }
      for (int i = 0; i < nq; ++i) {
        for (int g = 0; g < sh.n_kv; ++g) {
          PagedAttentionTile(q.data() + i * stride, stride, 1, pos0 + i, sh.n_heads, g, view,
                             table.data(), 0.125f, single.data() + i * stride, stride);
        }
        ASSERT_EQ(0, std::memcmp(tile.data() + i * stride, single.data() + i * stride, stride * 4))
            << "heads " << sh.n_heads << "/" << sh.n_kv << " hd " << sh.hd << " token " << i;
      }
    }
  });
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
  // Plain, and a window with soft-capping (the int8 blocks go through the general path).
  testing::ForEachTarget([&](const char* target) {
  SCOPED_TRACE(target);
  for (AttentionVariant var : {AttentionVariant{}, AttentionVariant{13, 3.0f}}) {
    for (int pos0 : {0, 17, 70}) {
      const int nq = 9;
      std::vector<float> q(nq * stride), got(q.size()), want(stride);
      for (auto& x : q) x = nd(rng);
      for (int g = 0; g < n_kv; ++g)
        PagedAttentionTile(q.data(), stride, nq, pos0, n_heads, g, view, table.data(), 0.125f,
                           got.data(), stride, var);
      for (int i = 0; i < nq; ++i) {
        PagedAttentionRef(q.data() + i * stride, n_heads, view, table.data(), pos0 + i + 1,
                          0.125f, want.data(), var);
        for (int e = 0; e < stride; ++e)
          ASSERT_NEAR(got[i * stride + e], want[e], 1e-5 * 7) << "window " << var.window << " " << e;
      }
    }
  }
  });
}

// The AMX tile path (attention_amx.h) against the double reference, for every shape it takes
// (head dims 32-256, incl. 96: a last group of 2 dim tiles; blocks of 16, 32 and 64; groups
// 1-4), tiles of 2-33 tokens crossing chunk boundaries and ending mid-block. Positions past
// the tile's last token hold NaN, so reading them (instead of staging zeros) fails.
// Bound per output: scores are off by at most ds = 3·2^-16·scale·max_j sum_d |q_d k_jd| (the
// split products), which moves a softmax average by at most 2·ds·max|v|; P's split adds
// 3·2^-16·max|v|; 1e-5·max|v| covers f32 accumulation.
TEST(AttentionTest, AmxTilesMatchReference) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  const AmxSwitch amx(true);
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Shape { int n_heads, n_kv, head_dim, block_size; };
  int checked = 0;
  for (Shape sh : {Shape{6, 2, 64, 16}, Shape{8, 8, 32, 16}, Shape{4, 1, 128, 32},
                   Shape{9, 3, 64, 16}, Shape{8, 2, 64, 16}, Shape{4, 2, 96, 16},
                   Shape{2, 1, 256, 64}, Shape{5, 5, 64, 32}}) {
    const int n_blocks_total = 320 / sh.block_size;
    const int64_t per_block = static_cast<int64_t>(sh.n_kv) * sh.block_size * sh.head_dim;
    std::vector<uint16_t> k0(per_block * n_blocks_total), v0(k0.size());
    for (auto& x : k0) x = F32ToF16(nd(rng));
    for (auto& x : v0) x = F32ToF16(nd(rng) * 3.0f);
    std::vector<int32_t> table;
    for (int64_t b = 0; b < n_blocks_total; ++b)
      table.push_back(static_cast<int32_t>((b * 7 + 3) % n_blocks_total));
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
    const int64_t hd_all = static_cast<int64_t>(sh.n_heads) * sh.head_dim;
    const int group = sh.n_heads / sh.n_kv;
    for (int64_t pos0 : {0, 5, 16, 63, 100, 250}) {
      for (int32_t nq : {2, 7, 16, 33}) {
        if (pos0 + nq > 320) continue;
        const int64_t end = pos0 + nq;
        // Positions >= end: NaN in K and V.
        std::vector<uint16_t> k = k0, v = v0;
        for (int64_t pos = end; pos < 320; ++pos) {
          const int64_t blk = table[pos / sh.block_size], j = pos % sh.block_size;
          for (int h = 0; h < sh.n_kv; ++h) {
            const int64_t base = (blk * sh.n_kv + h) * sh.block_size * sh.head_dim;
            for (int d = 0; d < sh.head_dim; ++d) {
              k[base + d * sh.block_size + j] = 0x7E00;
              v[base + j * sh.head_dim + d] = 0x7E00;
            }
          }
        }
        PagedKvView view{k.data(), v.data(), sh.n_kv, sh.block_size, sh.head_dim};
        if (!AttentionAmxUsable(nq, group, view)) continue;
        std::vector<float> q(nq * hd_all), got(nq * hd_all, -7.0f), want(hd_all);
        for (auto& x : q) x = nd(rng) * 2.0f;
        for (int32_t kvh = 0; kvh < sh.n_kv; ++kvh)
          PagedAttentionTile(q.data(), hd_all, nq, pos0, sh.n_heads, kvh, view, table.data(),
                             scale, got.data(), hd_all);
        float vmax = 0;
        for (int64_t pos = 0; pos < end; ++pos)
          for (int h = 0; h < sh.n_kv; ++h)
            for (int d = 0; d < sh.head_dim; ++d) {
              const int64_t blk = table[pos / sh.block_size], j = pos % sh.block_size;
              vmax = std::max(vmax, std::fabs(F16ToF32(
                  v[(blk * sh.n_kv + h) * sh.block_size * sh.head_dim + j * sh.head_dim + d])));
            }
        for (int32_t i = 0; i < nq; ++i) {
          PagedAttentionRef(q.data() + i * hd_all, sh.n_heads, view, table.data(), pos0 + i + 1,
                            scale, want.data());
          for (int h = 0; h < sh.n_heads; ++h) {
            const float* qh = q.data() + i * hd_all + h * sh.head_dim;
            double qk_max = 0;
            for (int64_t pos = 0; pos <= pos0 + i; ++pos) {
              const int64_t blk = table[pos / sh.block_size], j = pos % sh.block_size;
              const int64_t base = (blk * sh.n_kv + h / group) * sh.block_size * sh.head_dim;
              double sum = 0;
              for (int d = 0; d < sh.head_dim; ++d)
                sum += std::fabs(qh[d] * F16ToF32(k[base + d * sh.block_size + j]));
              qk_max = std::max(qk_max, sum);
            }
            const double ds = 3.0 * std::ldexp(1.0, -16) * scale * qk_max;
            const double tol = (2.0 * ds + 3.0 * std::ldexp(1.0, -16) + 1e-5) * vmax;
            for (int d = 0; d < sh.head_dim; ++d) {
              const int64_t e = static_cast<int64_t>(h) * sh.head_dim + d;
              ASSERT_NEAR(got[i * hd_all + e], want[e], tol)
                  << "heads " << sh.n_heads << "/" << sh.n_kv << " hd " << sh.head_dim
                  << " bs " << sh.block_size << " pos0 " << pos0 << " nq " << nq << " token "
                  << i << " head " << h << " dim " << d;
            }
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

// AmxSoftmaxChunk (16 rows per vector pass, batched row reductions) against a scalar online
// softmax over two chunks: rows of very different magnitudes (a max taken from the wrong row
// overflows exp, a sum from the wrong row scales it), causal masks that leave rows partly or
// wholly masked, padding rows, and differences far below exp's normal range (p = 0).
TEST(AttentionTest, AmxSoftmaxChunkMatchesScalar) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  constexpr int kRp = 48, kRows = 41, kGroup = 3, kHd = 32, kC = 64;
  const int64_t pos0 = 60;
  const float scale = 0.25f;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> m(kRp, -INFINITY), l(kRp, 0.0f), o(kRp * kHd);
  std::vector<double> m_ref(kRp, -INFINITY), l_ref(kRp, 0.0), o_ref(kRp * kHd);
  for (int i = 0; i < kRp * kHd; ++i) o_ref[i] = o[i] = nd(rng);
  for (int64_t key0 : {0, 64}) {
    std::vector<float> s(kRp * kC);
    for (int r = 0; r < kRp; ++r) {
      const float mag = r % 5 == 0 ? 400.0f : (r % 5 == 1 ? 0.01f : 8.0f);
      for (int j = 0; j < kC; ++j) s[r * kC + j] = nd(rng) * mag + (key0 > 0 ? r * 3.0f : 0.0f);
    }
    const std::vector<float> s0 = s;
    std::vector<uint16_t> ph(kRp * kC), pl(kRp * kC);
    AmxSoftmaxChunk(s.data(), kRp, kRows, kGroup, pos0, key0, scale, kHd, m.data(), l.data(),
                    o.data(), ph.data(), pl.data());
    for (int r = 0; r < kRp; ++r) {
      const int64_t live =
          r < kRows ? std::clamp<int64_t>(pos0 + r / kGroup + 1 - key0, 0, kC) : 0;
      double mx = m_ref[r];
      for (int j = 0; j < live; ++j) mx = std::max(mx, double{s0[r * kC + j]} * scale);
      const double c = std::isinf(m_ref[r]) ? 0.0 : std::exp(m_ref[r] - mx);
      double sum = 0;
      for (int j = 0; j < kC; ++j) {
        const double p = j < live ? std::exp(double{s0[r * kC + j]} * scale - mx) : 0.0;
        sum += p;
        // hi + lo keeps 16 bits of p (attention_amx.h); l checks exp itself to 1e-6.
        const double got = BF16ToF32(ph[r * kC + j]) + double{BF16ToF32(pl[r * kC + j])};
        ASSERT_NEAR(got, p, std::ldexp(1.0, -16) * p + 1e-30) << "row " << r << " key " << key0 + j;
      }
      // A row that has seen no key (padding) scales its output by 0, as on its first keys.
      m_ref[r] = mx;
      l_ref[r] = l_ref[r] * c + sum;
      for (int d = 0; d < kHd; ++d) o_ref[r * kHd + d] *= c;
      if (!std::isinf(m_ref[r])) {
        EXPECT_EQ(m[r], static_cast<float>(m_ref[r])) << "row " << r;
      }
      EXPECT_NEAR(l[r], l_ref[r], 1e-6 * l_ref[r]) << "row " << r;
      for (int d = 0; d < kHd; ++d)
        ASSERT_NEAR(o[r * kHd + d], o_ref[r * kHd + d], 1e-6 * std::fabs(o_ref[r * kHd + d]) + 1e-30)
            << "row " << r << " dim " << d;
    }
  }
}

// AmxSoftmaxChunk's window mask and soft-capping against a scalar computation of one chunk:
// rows see only keys in (pos - window, pos], scores are capped before the max.
TEST(AttentionTest, AmxSoftmaxChunkWindowSoftCap) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  constexpr int kRp = 32, kRows = 30, kGroup = 2, kHd = 16, kC = 64;
  const int64_t pos0 = 70, key0 = 64;
  const float scale = 0.5f;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (AttentionVariant var : {AttentionVariant{9, 0.0f}, AttentionVariant{0, 3.0f},
                               AttentionVariant{20, 5.0f}, AttentionVariant{1, 0.0f}}) {
    std::vector<float> m(kRp, -INFINITY), l(kRp, 0.0f), o(kRp * kHd, 0.0f), s(kRp * kC);
    for (auto& x : s) x = nd(rng);
    const std::vector<float> s0 = s;
    std::vector<uint16_t> ph(kRp * kC), pl(kRp * kC);
    AmxSoftmaxChunk(s.data(), kRp, kRows, kGroup, pos0, key0, scale, kHd, m.data(), l.data(),
                    o.data(), ph.data(), pl.data(), var);
    for (int r = 0; r < kRows; ++r) {
      const int64_t pos = pos0 + r / kGroup;
      std::vector<double> sc(kC, -INFINITY);
      double mx = -INFINITY;
      for (int j = 0; j < kC; ++j) {
        const int64_t key = key0 + j;
        if (key > pos || key < var.FirstKey(pos)) continue;
        double x = double{s0[r * kC + j]} * scale;
        if (var.softcap > 0) x = var.softcap * std::tanh(x / var.softcap);
        sc[j] = x;
        mx = std::max(mx, x);
      }
      double sum = 0;
      for (int j = 0; j < kC; ++j) {
        const double p = std::isinf(sc[j]) ? 0.0 : std::exp(sc[j] - mx);
        sum += p;
        const double got = BF16ToF32(ph[r * kC + j]) + double{BF16ToF32(pl[r * kC + j])};
        ASSERT_NEAR(got, p, 1e-5 * p + 1e-30)
            << "window " << var.window << " softcap " << var.softcap << " row " << r << " key " << j;
      }
      EXPECT_NEAR(m[r], mx, 1e-5 * std::fabs(mx)) << "row " << r;
      EXPECT_NEAR(l[r], sum, 1e-5 * sum) << "row " << r;
    }
  }
}

// What the AMX path takes: f16 K/V, head dims that are multiples of 32 up to 256, blocks of
// 16/32/64, at least 16 query rows over 2+ tokens, and only while AMX is enabled.
TEST(AttentionTest, AmxPathSelection) {
  if (!AmxBf16Available()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS denied it)";
  PagedKvView f16{nullptr, nullptr, 2, 16, 64};
  {
    const AmxSwitch amx(true);
    EXPECT_TRUE(AttentionAmxUsable(16, 3, f16));
    EXPECT_TRUE(AttentionAmxUsable(4, 4, f16));
    EXPECT_FALSE(AttentionAmxUsable(1, 16, f16));  // decode
    EXPECT_FALSE(AttentionAmxUsable(5, 3, f16));   // 15 rows
    PagedKvView odd = f16;
    odd.head_dim = 40;
    EXPECT_FALSE(AttentionAmxUsable(16, 3, odd));
    odd = f16;
    odd.block_size = 8;
    EXPECT_FALSE(AttentionAmxUsable(16, 3, odd));
    int8_t dummy = 0;
    float sc = 1;
    PagedKvView i8 = f16;
    i8.k8 = i8.v8 = &dummy;
    i8.k_scale = i8.v_scale = &sc;
    EXPECT_FALSE(AttentionAmxUsable(16, 3, i8));
  }
  const AmxSwitch off(false);
  EXPECT_FALSE(AttentionAmxUsable(16, 3, f16));
}

}  // namespace
}  // namespace tarmac::kernels
