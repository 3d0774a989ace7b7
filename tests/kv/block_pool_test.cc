#include "kv/block_pool.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

namespace tarmac::kv {
namespace {

TEST(BlockPoolTest, AllocateRefRelease) {
  BlockPool pool(3);
  auto a = pool.Allocate(), b = pool.Allocate(), c = pool.Allocate();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(*a, 0);
  EXPECT_FALSE(pool.Allocate().has_value());
  pool.Ref(*b);
  pool.Release(*b);
  EXPECT_EQ(pool.num_free(), 0);
  pool.Release(*b);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(*pool.Allocate(), *b);
  EXPECT_TRUE(pool.CheckIntegrity().ok());
}

TEST(BlockPoolTest, RandomisedWorkloadKeepsIntegrity) {
  BlockPool pool(64);
  std::mt19937 rng(1);
  std::vector<int32_t> held;  // one entry per reference
  for (int step = 0; step < 5000; ++step) {
    const int op = rng() % 3;
    if (op == 0) {
      if (auto b = pool.Allocate()) held.push_back(*b);
    } else if (op == 1 && !held.empty()) {
      const int32_t b = held[rng() % held.size()];
      pool.Ref(b);
      held.push_back(b);
    } else if (!held.empty()) {
      const size_t i = rng() % held.size();
      pool.Release(held[i]);
      held.erase(held.begin() + i);
    }
    ASSERT_TRUE(pool.CheckIntegrity().ok()) << step;
  }
  for (int32_t b : held) pool.Release(b);
  EXPECT_EQ(pool.num_free(), 64);
  EXPECT_TRUE(pool.CheckIntegrity().ok());
}

TEST(BlockPoolTest, RequestAndCacheHoldersAreCountedApart) {
  BlockPool pool(4);
  const int32_t a = *pool.Allocate(), b = *pool.Allocate();
  EXPECT_EQ(pool.num_request_held(), 2);
  pool.Ref(a, Holder::kCache);  // the prefix cache takes it too
  pool.Release(a);              // the request lets go: only the cache holds it
  EXPECT_EQ(pool.num_request_held(), 1);
  EXPECT_EQ(pool.num_cache_only(), 1);
  EXPECT_TRUE(pool.cached(a));
  pool.Ref(a);  // a request reuses the cached block
  EXPECT_EQ(pool.num_request_held(), 2);
  EXPECT_EQ(pool.num_cache_only(), 0);
  pool.Release(a, Holder::kCache);  // evicted while the request still holds it
  EXPECT_FALSE(pool.cached(a));
  EXPECT_EQ(pool.num_free(), 2);
  pool.Release(a);
  pool.Release(b);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_request_held(), 0);
  EXPECT_TRUE(pool.CheckIntegrity().ok());
}

TEST(BlockPoolTest, RandomisedHoldersKeepTheCountsExact) {
  BlockPool pool(32);
  std::mt19937 rng(3);
  std::vector<int32_t> req;        // one entry per request reference
  std::vector<int32_t> cache;      // blocks the "cache" holds
  for (int step = 0; step < 5000; ++step) {
    const int op = rng() % 5;
    if (op == 0) {
      if (auto b = pool.Allocate()) req.push_back(*b);
    } else if (op == 1 && !req.empty()) {
      const int32_t b = req[rng() % req.size()];
      if (!pool.cached(b)) {
        pool.Ref(b, Holder::kCache);
        cache.push_back(b);
      }
    } else if (op == 2 && !cache.empty()) {
      const int32_t b = cache[rng() % cache.size()];
      pool.Ref(b);
      req.push_back(b);
    } else if (op == 3 && !cache.empty()) {
      const size_t i = rng() % cache.size();
      pool.Release(cache[i], Holder::kCache);
      cache.erase(cache.begin() + i);
    } else if (!req.empty()) {
      const size_t i = rng() % req.size();
      pool.Release(req[i]);
      req.erase(req.begin() + i);
    }
    ASSERT_TRUE(pool.CheckIntegrity().ok()) << step;
    std::vector<int32_t> distinct = req;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    ASSERT_EQ(pool.num_request_held(), static_cast<int32_t>(distinct.size()));
    ASSERT_EQ(pool.num_free() + pool.num_request_held() + pool.num_cache_only(), pool.num_blocks());
  }
}

}  // namespace
}  // namespace tarmac::kv
