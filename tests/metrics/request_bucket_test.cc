// The one request-bucket definition: bands, defaults, interning and label values.
#include "metrics/request_bucket.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace tarmac::metrics {
namespace {

RequestFeatures F(int64_t prompt, int64_t max_tokens, float temp = 0.0f) {
  RequestFeatures f;
  f.prompt_tokens = prompt;
  f.max_tokens = max_tokens;
  f.temperature = temp;
  return f;
}

TEST(RequestBucket, DefaultBandsAndNames) {
  BucketTable t;
  const std::vector<std::string>& names = BucketTable::LabelNames();
  ASSERT_EQ(names.size(), 7u);
  EXPECT_EQ(names[0], "prompt_band");
  struct Case {
    RequestFeatures f;
    std::vector<std::string> labels;
  };
  RequestFeatures qa = F(600, 300, 0.3f);
  qa.task = "qa";
  qa.sla = "gold";
  qa.risk = Risk::kHigh;
  qa.priority = -2;
  const Case cases[] = {
      {F(0, 1), {"0-127", "1-63", "default", "standard", "0", "low", "normal"}},
      {F(127, 63, 0.5f), {"0-127", "1-63", "default", "standard", "low", "low", "normal"}},
      {F(128, 64, 0.51f), {"128-511", "64-255", "default", "standard", "high", "low", "normal"}},
      {F(2048, 1024, 1.5f), {"2048+", "1024+", "default", "standard", "high", "low", "normal"}},
      {qa, {"512-2047", "256-1023", "qa", "gold", "low", "high", "high"}},
  };
  for (const Case& c : cases) EXPECT_EQ(t.LabelValues(t.Of(c.f)), c.labels);
}

TEST(RequestBucket, InterningIsStableAndDense) {
  BucketTable t;
  const BucketId a = t.Of(F(10, 10));
  const BucketId b = t.Of(F(1000, 10));
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(t.Of(F(20, 30)), a);  // same bands
  EXPECT_EQ(t.size(), 2);
  EXPECT_EQ(t.Get(b).prompt_band, 2);
  EXPECT_EQ(t.Key(a), "task=default sla=standard prompt=0-127 output=1-63 T=0 risk=low priority=normal");
}

TEST(RequestBucket, ConfiguredBands) {
  BucketBands bands;
  bands.prompt_tokens = {100};
  bands.max_tokens = {10, 20};
  BucketTable t(bands);
  EXPECT_EQ(t.LabelValues(t.Of(F(99, 9)))[0], "0-99");
  EXPECT_EQ(t.LabelValues(t.Of(F(100, 15)))[0], "100+");
  EXPECT_EQ(t.LabelValues(t.Of(F(100, 15)))[1], "10-19");
  EXPECT_EQ(t.LabelValues(t.Of(F(100, 25)))[1], "20+");
  BucketBands bad;
  bad.max_tokens = {64, 32};
  EXPECT_EQ(bad.Validate().field(), "max_tokens");
  bad = BucketBands{};
  bad.prompt_tokens = {0};
  EXPECT_FALSE(bad.Validate().ok());
}

TEST(RequestBucket, RiskParsesOrNamesTheValue) {
  EXPECT_EQ(*ParseRisk("high"), Risk::kHigh);
  Result<Risk> r = ParseRisk("medium");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "risk");
  EXPECT_NE(r.status().message().find("medium"), std::string::npos);
}

TEST(RequestBucket, ConcurrentInterningAgrees) {
  BucketTable t;
  std::vector<std::vector<BucketId>> ids(4);
  std::vector<std::thread> ts;
  for (int k = 0; k < 4; ++k) {
    ts.emplace_back([&, k] {
      for (int i = 0; i < 1000; ++i) ids[k].push_back(t.Of(F(i * 3 % 3000, i % 1500)));
    });
  }
  for (auto& th : ts) th.join();
  for (int k = 1; k < 4; ++k) EXPECT_EQ(ids[k], ids[0]);
  // prompt 3i and max_tokens i for i < 1000 cross six band pairs.
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(*std::max_element(ids[0].begin(), ids[0].end()), 5);
}

}  // namespace
}  // namespace tarmac::metrics
