#include "prefix/session_pins.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

namespace tarmac::prefix {
namespace {

constexpr int32_t kBs = 4;

// Caches `tokens` (whole blocks) under ns as a finished request would and returns the path
// locked (as the request holds it when it finishes).
PrefixMatch CacheAndLock(kv::BlockPool* pool, RadixTree* tree, uint64_t ns, const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()) / kBs;
  std::vector<int32_t> blocks;
  for (int64_t i = 0; i < n; ++i) {
    auto b = pool->Allocate();
    if (!b) {
      tree->Evict(1);
      b = pool->Allocate();
    }
    if (!b) break;
    blocks.push_back(*b);
  }
  tree->Insert(ns, tokens, blocks);
  for (int32_t b : blocks) pool->Release(b);
  PrefixMatch m = tree->Match(ns, tokens, static_cast<int64_t>(blocks.size()));
  tree->Lock(m);
  return m;
}

std::vector<int32_t> Tokens(int32_t n, int32_t base) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = base + i;
  return v;
}

TEST(SessionPins, PinnedPathsAreNotEvictedUntilReleased) {
  kv::BlockPool pool(16);
  RadixTree tree(&pool, kBs);
  SessionPins pins(&tree);
  PrefixMatch m = CacheAndLock(&pool, &tree, 1, Tokens(12, 0));
  pins.Retain(1, {7, 60, 16}, m, 0);
  tree.Unlock(m);  // the request ends
  EXPECT_EQ(tree.Evict(16), 0);
  EXPECT_EQ(tree.num_nodes(), 3);
  EXPECT_EQ(pins.ReleaseOldest(1), 1);
  EXPECT_EQ(tree.Evict(16), 3);
  EXPECT_TRUE(pins.CheckIntegrity().ok());
  EXPECT_TRUE(tree.CheckIntegrity().ok());
}

TEST(SessionPins, RandomisedRetainsKeepIntegrityAndBudgets) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    kv::BlockPool pool(40);
    RadixTree tree(&pool, kBs);
    SessionPins pins(&tree);
    const int64_t budget = 6;
    double now = 0;
    for (int step = 0; step < 2000; ++step) {
      now += 0.25;
      const uint64_t ns = 1 + rng() % 3;
      switch (rng() % 5) {
        case 0:
        case 1: {  // a turn ends
          std::vector<int32_t> toks = Tokens(4 * (1 + static_cast<int32_t>(rng() % 4)), static_cast<int32_t>(rng() % 4) * 100);
          PrefixMatch m = CacheAndLock(&pool, &tree, ns, toks);
          pins.Retain(ns, {1 + rng() % 12, 1.0 + static_cast<double>(rng() % 20), budget}, m, now);
          tree.Unlock(m);
          break;
        }
        case 2: pins.Expire(now); break;
        case 3: pins.ReleaseOldest(1 + static_cast<int64_t>(rng() % 4)); break;
        case 4: pins.Drop(1 + rng() % 12); break;
      }
      ASSERT_TRUE(pins.CheckIntegrity().ok()) << pins.CheckIntegrity().message();
      ASSERT_TRUE(tree.CheckIntegrity().ok()) << tree.CheckIntegrity().message();
      for (uint64_t n = 1; n <= 3; ++n) ASSERT_LE(pins.pinned_blocks(n), budget);
    }
    EXPECT_GT(pins.num_sessions(), 0u);
    pins.Expire(now + 100);
    EXPECT_EQ(pins.num_sessions(), 0u);
  }
}

}  // namespace
}  // namespace tarmac::prefix
