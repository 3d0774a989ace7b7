// The planner's formulas on published shapes (Llama-3-8B: 128 KiB of f16 KV per token; the
// MLA latent cache of DeepSeek-V2/V3), requests that fit, the speculation speedup, the prefix
// bound, the workload's checks and its requests.
#include "control/capacity_plan.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tarmac::control {
namespace {

TEST(CapacityPlanTest, Llama3_8bIs128KibOfF16KvPerToken) {
  // 32 layers, 8 KV heads of 128 (grouped-query attention over 32 query heads).
  EXPECT_DOUBLE_EQ(KvBytesPerTokenGqa(32, 8, 128, 2.0), 128 * 1024);
  // Llama-2-7B, full multi-head attention: 32 x 32 x 128 -> 512 KiB.
  EXPECT_DOUBLE_EQ(KvBytesPerTokenGqa(32, 32, 128, 2.0), 512 * 1024);
  // Llama-3.2-1B: 16 layers, 8 KV heads of 64 -> 32 KiB.
  EXPECT_DOUBLE_EQ(KvBytesPerTokenGqa(16, 8, 64, 2.0), 32 * 1024);
}

TEST(CapacityPlanTest, MlaCachesTheLatentAndTheRopeKey) {
  // DeepSeek-V3: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64: 576 elements per layer.
  EXPECT_DOUBLE_EQ(KvBytesPerTokenMla(61, 512, 64, 2.0), 61 * 576 * 2);
  // DeepSeek-V2: 60 layers -> 67.5 KiB, against 128 heads x (128 + 64) K + 128 x 128 V with
  // full MHA: 60 x 128 x (192 + 128) x 2 bytes = 4.6 MiB.
  EXPECT_DOUBLE_EQ(KvBytesPerTokenMla(60, 512, 64, 2.0), 69120);
  EXPECT_LT(KvBytesPerTokenMla(60, 512, 64, 2.0) * 60, 60.0 * 128 * 320 * 2);
}

TEST(CapacityPlanTest, Int8HalvesTheElementsPlusScales) {
  const double b = Int8KvBytesPerElement(128, 16);
  EXPECT_DOUBLE_EQ(b, 1.0 + 4.0 / 2048);
  EXPECT_NEAR(KvBytesPerTokenGqa(32, 8, 128, b) / KvBytesPerTokenGqa(32, 8, 128, 2.0), 0.5, 0.001);
}

TEST(CapacityPlanTest, RequestsThatFitCountWholeBlocks) {
  const double per_token = 128 * 1024;
  EXPECT_DOUBLE_EQ(KvBytesPerRequest(per_token, 8192, 16), per_token * 8192);
  EXPECT_DOUBLE_EQ(KvBytesPerRequest(per_token, 8193, 16), per_token * 8208);
  // 16 GiB of KV holds 16 Llama-3-8B requests of 8192 tokens (1 GiB each).
  EXPECT_EQ(RequestsThatFit(16.0 * (1ll << 30), KvBytesPerRequest(per_token, 8192, 16)), 16);
  EXPECT_EQ(RequestsThatFit(0, 1), 0);
}

TEST(CapacityPlanTest, DecodeBoundAndSpeculation) {
  EXPECT_DOUBLE_EQ(DecodeTpotLowerBound(16e9, 400e9), 0.04);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerVerify(0, 4), 1);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerVerify(1, 4), 5);
  EXPECT_NEAR(ExpectedTokensPerVerify(0.5, 2), 1.75, 1e-12);
  // a = 0.8, k = 4: E = 3.36; with a free verify of the same cost as a decode and drafts at
  // 5% each, 3.36 / 1.2.
  EXPECT_NEAR(SpeculationSpeedup(0.8, 4, 1.0, 4 * 0.05, 1.0, 0), 3.3616 / 1.2, 1e-9);
  EXPECT_LT(SpeculationSpeedup(0.1, 4, 1.0, 0.2, 1.6, 0), 1.0);  // low acceptance does not pay
  EXPECT_DOUBLE_EQ(PrefixCacheUpperBound(300, 1000), 0.3);
  EXPECT_DOUBLE_EQ(PrefixCacheUpperBound(1, 0), 0);
}

TEST(CapacityPlanTest, WorkloadErrorsNameTheField) {
  PlanWorkload w;
  EXPECT_TRUE(w.Validate().ok());
  w.classes.push_back({});
  w.classes[1].share = 0;
  EXPECT_EQ(w.Validate().field(), "classes[1].share");
  w.classes[1].share = 1;
  w.classes[1].shared_prefix_tokens = 500;
  EXPECT_EQ(w.Validate().field(), "classes[1].shared_prefix_tokens");
  w = PlanWorkload{};
  w.rate = -1;
  EXPECT_EQ(w.Validate().field(), "rate");
  w = PlanWorkload{};
  w.classes.clear();
  EXPECT_EQ(w.Validate().field(), "classes");
}

TEST(CapacityPlanTest, RequestsFollowTheSharesAndArrivePoisson) {
  PlanWorkload w;
  w.requests = 1000;
  w.classes = {{"a", 3, 10, 5}, {"b", 1, 100, 50}};
  const std::vector<SimRequest> closed = MakeRequests(w, 0);
  int a = 0;
  for (const SimRequest& r : closed) {
    a += r.cls == 0;
    EXPECT_EQ(r.arrival_s, 0);
  }
  EXPECT_EQ(a, 750);
  const std::vector<SimRequest> open = MakeRequests(w, 20);
  EXPECT_NEAR(open.back().arrival_s, 1000 / 20.0, 5);  // mean gap 1/rate
  for (size_t i = 1; i < open.size(); ++i) EXPECT_GE(open[i].arrival_s, open[i - 1].arrival_s);
}

}  // namespace
}  // namespace tarmac::control
