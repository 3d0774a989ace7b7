#include "kv/block_pool.h"

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

}  // namespace
}  // namespace tarmac::kv
