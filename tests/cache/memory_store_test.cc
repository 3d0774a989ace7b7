#include "cache/memory_store.h"

#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace tarmac::cache {
namespace {

double g_now = 0;
double Now() { return g_now; }

TEST(MemoryStore, GetPutEraseAndTtl) {
  g_now = 0;
  MemoryStore s(1 << 20, &Now);
  ASSERT_TRUE(s.Put("a:1", "one", 10).ok());
  EXPECT_EQ(**s.Get("a:1"), "one");
  EXPECT_FALSE(s.Get("a:2")->has_value());
  g_now = 9.9;
  EXPECT_TRUE(s.Get("a:1")->has_value());
  g_now = 10;
  EXPECT_FALSE(s.Get("a:1")->has_value());  // expired
  EXPECT_EQ(s.stats().expirations, 1);
  ASSERT_TRUE(s.Put("a:1", "uno", 10).ok());
  EXPECT_TRUE(*s.Erase("a:1"));
  EXPECT_FALSE(*s.Erase("a:1"));
  EXPECT_TRUE(s.CheckIntegrity().ok());
}

TEST(MemoryStore, ErasePrefixTakesExactlyThePrefix) {
  MemoryStore s(1 << 20);
  for (const char* k : {"r:t1:a", "r:t1:b", "r:t10:a", "r:t2:a", "r:t1"}) ASSERT_TRUE(s.Put(k, "v", 60).ok());
  EXPECT_EQ(*s.ErasePrefix("r:t1:"), 2);
  EXPECT_TRUE(s.Get("r:t10:a")->has_value());
  EXPECT_TRUE(s.Get("r:t1")->has_value());
  EXPECT_EQ(s.stats().entries, 3);
  EXPECT_TRUE(s.CheckIntegrity().ok());
}

TEST(MemoryStore, BudgetEvictsLeastRecentlyUsed) {
  const int64_t entry = 2 + 100 + MemoryStore::kEntryOverhead;  // key "kN", 100-byte value
  MemoryStore s(3 * entry);
  const std::string v(100, 'x');
  ASSERT_TRUE(s.Put("k1", v, 60).ok());
  ASSERT_TRUE(s.Put("k2", v, 60).ok());
  ASSERT_TRUE(s.Put("k3", v, 60).ok());
  ASSERT_TRUE(s.Get("k1")->has_value());  // k2 is now the least recent
  ASSERT_TRUE(s.Put("k4", v, 60).ok());
  EXPECT_FALSE(s.Get("k2")->has_value());
  EXPECT_TRUE(s.Get("k1")->has_value());
  EXPECT_EQ(s.stats().evictions, 1);
  EXPECT_FALSE(s.Put("big", std::string(1000, 'x'), 60).ok());  // alone over the budget
  EXPECT_TRUE(s.CheckIntegrity().ok());
}

TEST(MemoryStore, RandomChurnHoldsTheBudget) {
  g_now = 0;
  MemoryStore s(20000, &Now);
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) {
    g_now += 0.01;
    const std::string key = fmt::format("t{}:{}", rng() % 5, rng() % 300);
    switch (rng() % 6) {
      case 0: case 1: case 2:
        ASSERT_TRUE(s.Put(key, std::string(rng() % 400, 'v'), 0.5 + (rng() % 100) * 0.1).ok());
        break;
      case 3: (void)s.Get(key); break;
      case 4: (void)s.Erase(key); break;
      case 5: if (rng() % 50 == 0) (void)s.ErasePrefix(fmt::format("t{}:", rng() % 5)); break;
    }
    ASSERT_LE(s.stats().bytes, 20000);
    if (i % 97 == 0) {
      ASSERT_TRUE(s.CheckIntegrity().ok()) << s.CheckIntegrity().message();
    }
  }
  const StoreStats st = s.stats();
  EXPECT_GT(st.evictions, 0);
  EXPECT_GT(st.expirations, 0);
  EXPECT_TRUE(s.CheckIntegrity().ok());
}

}  // namespace
}  // namespace tarmac::cache
