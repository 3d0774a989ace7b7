// Tree attention (speculative token trees): a tile of tree tokens, each seeing the context
// and its ancestors only, against (1) the double-precision reference with the same mask and
// (2) each root-to-leaf path laid out as its own sequence (the context's K/V, then the path's
// nodes at consecutive positions) through the plain causal kernel.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_features.h"

#include "kernels/attention.h"
#include "kernels/matmul_amx.h"
#include "tensor/fp16.h"

namespace tarmac::kernels {
namespace {

struct Tree {
  std::vector<int32_t> parent;  // -1: child of the context's last token
  std::vector<uint64_t> bits;   // ancestors and self
};

// A random tree of n nodes, parents before children.
Tree RandomTree(int32_t n, std::mt19937& rng) {
  Tree t;
  for (int32_t i = 0; i < n; ++i) {
    std::uniform_int_distribution<int32_t> pd(-1, i - 1);
    const int32_t p = i == 0 ? -1 : pd(rng);
    t.parent.push_back(p);
    t.bits.push_back((p < 0 ? 0 : t.bits[p]) | (uint64_t{1} << i));
  }
  return t;
}

struct Kv {
  int32_t n_kv, hd, bs, nb;
  std::vector<uint16_t> k, v;
  PagedKvView View() { return PagedKvView{k.data(), v.data(), n_kv, bs, hd}; }
  // Copies position `from` (through table a) to position `to` (through table b).
  void Copy(const std::vector<int32_t>& a, int64_t from, const std::vector<int32_t>& b, int64_t to) {
    const PagedKvView view = View();
    for (int32_t h = 0; h < n_kv; ++h) {
      const int64_t fa = view.RowOffset(a[from / bs], h), tb = view.RowOffset(b[to / bs], h);
      for (int32_t d = 0; d < hd; ++d) {
        k[tb + d * bs + to % bs] = k[fa + d * bs + from % bs];
        v[tb + (to % bs) * hd + d] = v[fa + (from % bs) * hd + d];
      }
    }
  }
};

// The paths run on the Highway tiles (AMX off: its split-bf16 products have their own bound,
// attention_test.cc), so both sides are f32 sums of the same terms.
TEST(TreeAttentionTest, TreeTilesMatchReferenceAndPaths) {
  const ScopedIsa no_amx(Isa::kAvx512);  // clamped to this CPU's level
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  struct Shape { int n_heads, n_kv, head_dim, block_size; };
  int paths = 0;
  for (Shape sh : {Shape{6, 2, 64, 16}, Shape{4, 4, 64, 16}, Shape{8, 2, 32, 8},
                   Shape{3, 3, 20, 8}, Shape{4, 1, 128, 32}}) {
    Kv kv{sh.n_kv, sh.head_dim, sh.block_size, 64, {}, {}};
    const int64_t per_block = static_cast<int64_t>(sh.n_kv) * sh.block_size * sh.head_dim;
    kv.k.resize(per_block * kv.nb);
    kv.v.resize(per_block * kv.nb);
    for (auto& x : kv.k) x = F32ToF16(nd(rng));
    for (auto& x : kv.v) x = F32ToF16(nd(rng) * 3.0f);
    const PagedKvView view = kv.View();
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
    const int64_t hd_all = static_cast<int64_t>(sh.n_heads) * sh.head_dim;
    // Blocks 0..31: the tree's sequence (scattered); 32..63: the path sequences.
    std::vector<int32_t> table;
    for (int32_t b = 0; b < 32; ++b) table.push_back((b * 7 + 3) % 32);
    for (int64_t ctx : {1, 15, 16, 63, 130}) {
      for (int32_t n : {1, 5, 17, 40, 64}) {
        const Tree tree = RandomTree(n, rng);
        // The context's last token and the tree in one tile (the engine's layout), in tiles
        // of up to 32 tokens as the model cuts them.
        const int32_t nq = n + 1;
        const int64_t pos0 = ctx - 1;
        std::vector<uint64_t> bits(nq, 0);
        std::copy(tree.bits.begin(), tree.bits.end(), bits.begin() + 1);
        std::vector<float> q(nq * hd_all), got(nq * hd_all, -7.0f), want(hd_all);
        for (auto& x : q) x = nd(rng) * 2.0f;
        for (int32_t t0 = 0; t0 < nq; t0 += 32) {
          const int32_t tn = std::min(32, nq - t0);
          const TreeMask mask{ctx, bits.data() + t0};
          for (int32_t kvh = 0; kvh < sh.n_kv; ++kvh)
            PagedAttentionTile(q.data() + t0 * hd_all, hd_all, tn, pos0 + t0, sh.n_heads, kvh, view,
                               table.data(), scale, got.data() + t0 * hd_all, hd_all, {}, &mask);
        }
        for (int32_t i = 0; i < nq; ++i) {
          const TreeMask mask{ctx, bits.data() + i};
          PagedAttentionRef(q.data() + i * hd_all, sh.n_heads, view, table.data(), pos0 + i + 1,
                            scale, want.data(), {}, &mask);
          for (int64_t e = 0; e < hd_all; ++e)
            ASSERT_NEAR(got[i * hd_all + e], want[e], 1.2e-4)
                << "heads " << sh.n_heads << "/" << sh.n_kv << " hd " << sh.head_dim << " ctx " << ctx
                << " tree " << n << " token " << i << " elem " << e;
        }
        // Every leaf's path as its own sequence: the context copied, then the path's nodes.
        std::vector<bool> leaf(n, true);
        for (int32_t i = 0; i < n; ++i)
          if (tree.parent[i] >= 0) leaf[tree.parent[i]] = false;
        std::vector<int32_t> ptable;
        for (int32_t b = 0; b < 32; ++b) ptable.push_back(32 + (b * 5 + 1) % 32);
        for (int64_t p = 0; p < ctx; ++p) kv.Copy(table, p, ptable, p);
        for (int32_t l = 0; l < n; ++l) {
          if (!leaf[l]) continue;
          std::vector<int32_t> path;
          for (int32_t x = l; x >= 0; x = tree.parent[x]) path.insert(path.begin(), x);
          for (size_t d = 0; d < path.size(); ++d) kv.Copy(table, ctx + path[d], ptable, ctx + d);
          const int32_t pn = static_cast<int32_t>(path.size());
          std::vector<float> pq(pn * hd_all), pout(pn * hd_all);
          for (int32_t d = 0; d < pn; ++d)
            std::copy_n(q.data() + (1 + path[d]) * hd_all, hd_all, pq.data() + d * hd_all);
          for (int32_t kvh = 0; kvh < sh.n_kv; ++kvh)
            PagedAttentionTile(pq.data(), hd_all, pn, ctx, sh.n_heads, kvh, view, ptable.data(), scale,
                               pout.data(), hd_all);
          for (int32_t d = 0; d < pn; ++d)
            for (int64_t e = 0; e < hd_all; ++e)
              ASSERT_NEAR(got[(1 + path[d]) * hd_all + e], pout[d * hd_all + e], 1.2e-4)
                  << "ctx " << ctx << " tree " << n << " leaf " << l << " depth " << d;
          ++paths;
        }
      }
    }
  }
  EXPECT_GT(paths, 200);
}

}  // namespace
}  // namespace tarmac::kernels
