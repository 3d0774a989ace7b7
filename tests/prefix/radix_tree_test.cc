#include "prefix/radix_tree.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

namespace tarmac::prefix {
namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> Seq(std::initializer_list<int32_t> t) { return t; }

// Allocates n blocks, evicting from the tree when the pool runs dry.
std::vector<int32_t> AllocBlocks(kv::BlockPool* pool, RadixTree* tree, int64_t n,
                                 int64_t* evicted = nullptr) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    auto b = pool->Allocate();
    if (!b) {
      const int64_t e = tree->Evict(1);
      if (evicted != nullptr) *evicted += e;
      b = pool->Allocate();
    }
    if (!b) break;
    out.push_back(*b);
  }
  return out;
}

TEST(RadixTreeTest, MatchInsertLockEvict) {
  kv::BlockPool pool(8);
  RadixTree tree(&pool, kBs);
  const auto toks = Seq({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  auto blocks = AllocBlocks(&pool, &tree, 2);
  EXPECT_EQ(tree.Insert(7, toks, blocks), 2);
  for (int32_t b : blocks) pool.Release(b);  // the request finishes; the tree keeps them
  EXPECT_EQ(pool.num_used(), 2);
  ASSERT_TRUE(tree.CheckIntegrity().ok());

  // Full-block granularity, capped by max_blocks (the last prompt token is always computed).
  auto m = tree.Match(7, toks, (static_cast<int64_t>(toks.size()) - 1) / kBs);
  EXPECT_EQ(m.blocks, blocks);
  m = tree.Match(7, Seq({1, 2, 3, 4, 5, 6, 7, 8}), (8 - 1) / kBs);
  EXPECT_EQ(m.num_blocks(), 1);
  m = tree.Match(7, Seq({1, 2, 3, 9, 5, 6, 7, 8}), 2);
  EXPECT_EQ(m.num_blocks(), 0);
  // Another namespace (another tenant or model) never sees these blocks.
  EXPECT_EQ(tree.Match(8, toks, 2).num_blocks(), 0);

  // Locked prefixes survive eviction; unlocked ones go, leaf first.
  m = tree.Match(7, toks, 1);
  tree.Lock(m);
  EXPECT_EQ(tree.Evict(10), 1);  // only the second block was evictable
  EXPECT_EQ(tree.num_nodes(), 1);
  ASSERT_TRUE(tree.CheckIntegrity().ok());
  tree.Unlock(m);
  EXPECT_EQ(tree.Evict(10), 1);
  EXPECT_EQ(pool.num_free(), 8);
  ASSERT_TRUE(tree.CheckIntegrity().ok());
  ASSERT_TRUE(pool.CheckIntegrity().ok());
}

TEST(RadixTreeTest, DuplicateInsertKeepsTheCachedBlock) {
  kv::BlockPool pool(8);
  RadixTree tree(&pool, kBs);
  const auto toks = Seq({1, 2, 3, 4, 5, 6, 7, 8});
  auto a = AllocBlocks(&pool, &tree, 2);
  auto b = AllocBlocks(&pool, &tree, 2);
  EXPECT_EQ(tree.Insert(1, toks, a), 2);
  EXPECT_EQ(tree.Insert(1, toks, b), 0);  // same tokens computed twice: the first copy stays
  for (int32_t x : a) pool.Release(x);
  for (int32_t x : b) pool.Release(x);
  EXPECT_EQ(pool.num_used(), 2);
  EXPECT_EQ(tree.Match(1, toks, 2).blocks, a);
  ASSERT_TRUE(tree.CheckIntegrity().ok());
}

TEST(RadixTreeTest, EvictsLeastRecentlyUsedFirst) {
  kv::BlockPool pool(8);
  RadixTree tree(&pool, kBs);
  const auto x = Seq({1, 1, 1, 1}), y = Seq({2, 2, 2, 2});
  auto bx = AllocBlocks(&pool, &tree, 1), by = AllocBlocks(&pool, &tree, 1);
  tree.Insert(0, x, bx);
  tree.Insert(0, y, by);
  pool.Release(bx[0]);
  pool.Release(by[0]);
  tree.Match(0, x, 1);  // x is now more recent than y
  EXPECT_EQ(tree.Evict(1), 1);
  EXPECT_EQ(tree.Match(0, x, 1).num_blocks(), 1);
  EXPECT_EQ(tree.Match(0, y, 1).num_blocks(), 0);
}

// Requests over a small alphabet (so prefixes are shared) in 3 namespaces, on a pool small
// enough to force eviction. After every step: both managers' integrity checks, and every
// block's refcount equals (requests holding it) + (1 if cached), i.e. free + held by
// requests + held only by the tree = total.
TEST(RadixTreeTest, RandomisedWorkloadKeepsAccounting) {
  kv::BlockPool pool(40);
  RadixTree tree(&pool, kBs);
  std::mt19937 rng(17);
  struct Req {
    uint64_t ns;
    std::vector<int32_t> tokens;
    PrefixMatch match;
    std::vector<int32_t> own;  // blocks allocated by the request (beyond the cached prefix)
  };
  std::vector<Req> running;
  int64_t evicted = 0, hit_blocks = 0;
  auto finish = [&](size_t i, bool insert) {
    Req& r = running[i];
    std::vector<int32_t> all = r.match.blocks;
    all.insert(all.end(), r.own.begin(), r.own.end());
    const size_t full = std::min(all.size(), r.tokens.size() / kBs);
    if (insert) tree.Insert(r.ns, r.tokens, std::span<const int32_t>(all).first(full));
    tree.Unlock(r.match);
    for (int32_t b : r.match.blocks) pool.Release(b);
    for (int32_t b : r.own) pool.Release(b);
    running.erase(running.begin() + i);
  };
  for (int step = 0; step < 3000; ++step) {
    if (running.size() < 4 && rng() % 2 == 0) {
      Req r;
      r.ns = rng() % 3;
      const int len = 1 + static_cast<int>(rng() % 20);
      for (int i = 0; i < len; ++i) r.tokens.push_back(static_cast<int32_t>(rng() % 2));
      r.match = tree.Match(r.ns, r.tokens, (len - 1) / kBs);
      tree.Lock(r.match);
      for (int32_t b : r.match.blocks) pool.Ref(b);  // the request's own reference
      const int64_t need = (len + kBs - 1) / kBs - r.match.num_blocks();
      hit_blocks += r.match.num_blocks();
      r.own = AllocBlocks(&pool, &tree, need, &evicted);
      if (static_cast<int64_t>(r.own.size()) < need) {  // cannot fit now: give everything back
        running.push_back(std::move(r));
        finish(running.size() - 1, false);
      } else {
        running.push_back(std::move(r));
      }
    } else if (!running.empty()) {
      finish(rng() % running.size(), rng() % 4 != 0);  // some requests are cancelled
    }
    ASSERT_TRUE(tree.CheckIntegrity().ok()) << step << ": " << tree.CheckIntegrity().message();
    ASSERT_TRUE(pool.CheckIntegrity().ok()) << step;
    std::map<int32_t, int32_t> expect;
    for (const Req& r : running) {
      for (int32_t b : r.match.blocks) expect[b]++;
      for (int32_t b : r.own) expect[b]++;
    }
    for (int32_t b : tree.CachedBlocks()) expect[b]++;
    for (int32_t b = 0; b < pool.num_blocks(); ++b) {
      const auto it = expect.find(b);
      ASSERT_EQ(pool.refcount(b), it == expect.end() ? 0 : it->second) << "block " << b << " step " << step;
    }
  }
  // The workload really exercised sharing and eviction.
  EXPECT_GT(hit_blocks, 100);
  EXPECT_GT(evicted, 10);
  while (!running.empty()) finish(0, true);
  tree.Evict(1 << 20);
  EXPECT_EQ(tree.num_nodes(), 0);
  EXPECT_EQ(pool.num_free(), pool.num_blocks());
}

}  // namespace
}  // namespace tarmac::prefix
