#include "cache/redis_store.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "common/redis_server.h"

namespace tarmac::cache {
namespace {

using testing::HaveRedis;
using testing::RedisServer;

TEST(RedisUrl, Parses) {
  auto o = ParseRedisUrl("redis://:s3cret@10.0.0.5:6380/2");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->host, "10.0.0.5");
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->db, 2);
  EXPECT_EQ(o->password, "s3cret");
  o = ParseRedisUrl("redis://cache.local");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->port, 6379);
  EXPECT_EQ(o->db, 0);
  EXPECT_NE(ParseRedisUrl("http://x").status().message().find("redis://"), std::string::npos);
  EXPECT_NE(ParseRedisUrl("redis://x:99999").status().message().find("port"), std::string::npos);
  EXPECT_NE(ParseRedisUrl("redis://:6379").status().message().find("no host"), std::string::npos);
  EXPECT_NE(ParseRedisUrl("redis://x/abc").status().message().find("database"), std::string::npos);
}

TEST(RedisStore, AgainstARealServer) {
  if (!HaveRedis()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer redis;
  ASSERT_TRUE(redis.running());
  RedisStore s(*ParseRedisUrl(redis.url()));
  ASSERT_TRUE(s.Put("tarmac:r:t1:a", std::string("bin\0ary", 7), 60).ok());
  auto v = s.Get("tarmac:r:t1:a");
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_TRUE(v->has_value());
  EXPECT_EQ(**v, std::string("bin\0ary", 7));
  EXPECT_FALSE(s.Get("tarmac:r:t1:zz")->has_value());
  ASSERT_TRUE(s.Put("tarmac:r:t1:b", "v", 60).ok());
  ASSERT_TRUE(s.Put("tarmac:r:t10:a", "v", 60).ok());
  ASSERT_TRUE(s.Put("tarmac:r:t1*:a", "v", 60).ok());  // a glob character stays literal
  EXPECT_EQ(*s.ErasePrefix("tarmac:r:t1:"), 2);
  EXPECT_TRUE(s.Get("tarmac:r:t10:a")->has_value());
  EXPECT_TRUE(s.Get("tarmac:r:t1*:a")->has_value());
  EXPECT_TRUE(*s.Erase("tarmac:r:t10:a"));
  EXPECT_FALSE(*s.Erase("tarmac:r:t10:a"));
  // TTL.
  ASSERT_TRUE(s.Put("tarmac:r:ttl", "v", 0.05).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  EXPECT_FALSE(s.Get("tarmac:r:ttl")->has_value());
  EXPECT_EQ(s.stats().errors, 0);
}

TEST(RedisStore, OutageFailsFastCountsAndRecovers) {
  if (!HaveRedis()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer redis;
  RedisOptions o = *ParseRedisUrl(redis.url());
  o.retry_s = 0.1;
  RedisStore s(o);
  ASSERT_TRUE(s.Put("k", "v", 60).ok());
  redis.Stop();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(s.Get("k").ok());
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(spent, 2.0);  // bounded by the timeouts, and mostly no connect attempt at all
  EXPECT_GE(s.stats().errors, 20);
  EXPECT_FALSE(s.connected());
  redis.Start();
  bool back = false;
  for (int i = 0; i < 50 && !back; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    back = s.Put("k", "again", 60).ok();
  }
  ASSERT_TRUE(back);
  EXPECT_EQ(**s.Get("k"), "again");
}

TEST(RedisStore, AConnectionThatWentStaleIsReplacedWithoutAFailure) {
  if (!HaveRedis()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer redis;
  RedisStore s(*ParseRedisUrl(redis.url()));
  ASSERT_TRUE(s.Put("k", "v", 60).ok());
  redis.Stop();
  redis.Start();  // the store's connection is now dead, and it does not know yet
  EXPECT_TRUE(s.Put("k", "w", 60).ok());
  EXPECT_EQ(**s.Get("k"), "w");
  EXPECT_EQ(s.stats().errors, 1);  // the dead connection, counted
}

}  // namespace
}  // namespace tarmac::cache
