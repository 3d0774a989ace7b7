// `tarmac plan` for real: the KV formula on the model's shape (wp-11m: 2 x 6 layers x 2 KV
// heads x 64 x 2 bytes = 3 KiB per token), the batching curve, --measure's predictions, the
// workload file's checks (an unknown key or a bad value names its path) and bad flags (exit 2).
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"

namespace tarmac {
namespace {

class PlanTest : public testing::TempDirTest {
 protected:
  testing::RunResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), "plan");
    return testing::RunTarmac(std::move(args), dir_.string());
  }
};

TEST_F(PlanTest, FormulasFromTheShape) {
  auto r = Run({"-m", testing::kWp11m, "--memory", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kv"]["form"], "gqa");
  EXPECT_DOUBLE_EQ(j["kv"]["f16_bytes_per_token"].get<double>(), 3072);
  EXPECT_NEAR(j["kv"]["int8_bytes_per_token"].get<double>(), 3072 / 2.0 * (1 + 4.0 / (64 * 16)), 1e-9);
  bool saw512 = false;
  for (const auto& c : j["kv"]["by_context"]) {
    if (c["context"] != 512) continue;
    saw512 = true;
    EXPECT_EQ(c["f16_requests_fit"], (1 << 30) / (3072 * 512));
  }
  EXPECT_TRUE(saw512);
  // A step reads every weight but the untied embedding (one row of it): wp-11m's token_embd is
  // 2048 x 384 f16.
  EXPECT_DOUBLE_EQ(j["model"]["weight_bytes"].get<double>() - j["decode"]["step_weight_bytes"].get<double>(),
                   2048.0 * 384 * 2);
  EXPECT_DOUBLE_EQ(j["decode"]["batching"][1]["weight_bytes_per_token"].get<double>(),
                   j["decode"]["step_weight_bytes"].get<double>() / 2);
  EXPECT_FALSE(j["model"].contains("moe"));
  EXPECT_TRUE(j["decode"]["tpot_lower_bound_ms"].is_null());  // no bandwidth
  EXPECT_FALSE(j.contains("predicted"));
  r = Run({"-m", testing::kWp11m, "--bandwidth-gbs", "10", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto k = nlohmann::json::parse(r.out);
  EXPECT_NEAR(k["decode"]["tpot_lower_bound_ms"].get<double>(), k["decode"]["step_weight_bytes"].get<double>() / 10e9 * 1e3, 1e-9);
}

// A mixture of experts: active parameters, and a batch's expected experts per layer
// E (1 - (1 - k/E)^B): a step of B tokens reads the dense part plus that share of the experts.
TEST_F(PlanTest, MixtureOfExpertsTerms) {
  const std::string f = Path("moe.gguf");
  auto mk = testing::RunTarmac({"gguf", "make-random", "--arch", "qwen3moe", "--shape",
                               "dim=64,layers=2,heads=4,kv_heads=2,ffn=96,vocab=300,head_dim=16,"
                               "experts=16,experts_used=2,expert_ffn=64,tied=1",
                               "--type", "f32", f},
                              dir_.string());
  ASSERT_EQ(mk.exit_code, 0) << mk.err;
  auto r = Run({"-m", f, "--memory", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& moe = j["model"]["moe"];
  EXPECT_EQ(moe["experts"], 16);
  EXPECT_EQ(moe["experts_used"], 2);
  const double expert_bytes = 2.0 * 16 * 3 * 64 * 64 * 4;  // layers, experts, matrices, f32
  EXPECT_DOUBLE_EQ(moe["expert_bytes"].get<double>(), expert_bytes);
  const double params = j["model"]["params"].get<double>();
  EXPECT_DOUBLE_EQ(moe["active_params"].get<double>(), params - expert_bytes / 4 * 14 / 16);
  const double dense = j["model"]["weight_bytes"].get<double>() - expert_bytes;
  for (const auto& b : j["decode"]["batching"]) {
    const double B = b["batch"].get<double>();
    const double uni = 16 * (1 - std::pow(1 - 2.0 / 16, B));
    EXPECT_NEAR(b["experts_read_per_layer"].get<double>(), uni, 1e-9) << B;
    EXPECT_NEAR(b["weight_bytes_per_token"].get<double>(), (dense + expert_bytes * uni / 16) / B,
                1e-6) << B;
  }
  EXPECT_DOUBLE_EQ(j["decode"]["batching"][0]["experts_read_per_layer"].get<double>(), 2.0);
}

TEST_F(PlanTest, MeasurePredictsFromTheProbe) {
  const std::string wl = Path("w.yaml");
  std::ofstream(wl) << "concurrency: 4\nrequests: 16\ntarget_rate: 100\nclasses:\n"
                       "  - {name: qa, share: 3, prompt_tokens: 32, output_tokens: 16, tier: premium, acceptance: 0.7}\n"
                       "  - {name: doc, share: 1, prompt_tokens: 200, output_tokens: 32, shared_prefix_tokens: 100}\n";
  auto r = Run({"-m", TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf", "--workload", wl, "--slo", "premium=500:50",
                "--measure", "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LT(j["probe"]["seconds"].get<double>(), 30);
  EXPECT_GT(j["decode"]["bandwidth_bytes_per_s"].get<double>(), 0);
  EXPECT_GE(j["decode"]["step_cost_curve"].size(), 3u);
  const auto& p = j["predicted"];
  EXPECT_GT(p["batch1_decode_tpot_ms"].get<double>(), 0);
  EXPECT_GT(p["output_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(p["max_sustainable_rate"].get<double>(), 0);
  EXPECT_GE(p["replicas_for_target_rate"].get<int>(), 1);
  ASSERT_EQ(p["slo_attainment"].size(), 1u);
  EXPECT_EQ(p["slo_attainment"][0]["tier"], "premium");
  // Prefix bound: (1 x 100) / (3 x 32 + 1 x 200).
  EXPECT_NEAR(j["prefix_cache"]["upper_bound_saved_fraction"].get<double>(), 100.0 / 296, 1e-9);
  // Stated acceptance but no draft measured: not judged, and says why.
  EXPECT_TRUE(j["speculation"][0]["pays"].is_null());
  EXPECT_NE(j["speculation"][0]["why"].get<std::string>().find("draft"), std::string::npos);
}

TEST_F(PlanTest, WorkloadAndFlagErrorsNameWhatIsWrong) {
  struct Case {
    const char* yaml;
    const char* needle;
  };
  for (const Case& c : {Case{"rate: 1\nbogus: 2\n", "unknown key 'bogus'"},
                        Case{"classes:\n  - {prompt_tokens: 10, output_tokens: 5, sharez: 1}\n", "classes[0].sharez"},
                        Case{"classes:\n  - {prompt_tokens: ten, output_tokens: 5}\n", "classes[0].prompt_tokens"},
                        Case{"classes:\n  - {prompt_tokens: 10}\n", "needs prompt_tokens and output_tokens"},
                        Case{"classes:\n  - {prompt_tokens: 10, output_tokens: 5, share: 0}\n", "classes[0].share"},
                        Case{"concurrency: [1\n", "not valid YAML"}}) {
    const std::string wl = Path("bad.yaml");
    std::ofstream(wl) << c.yaml;
    auto r = Run({"-m", testing::kWp11m, "--workload", wl});
    EXPECT_EQ(r.exit_code, 2) << c.yaml;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
  auto r = Run({"-m", testing::kWp11m, "--slo", "x=1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--slo"), std::string::npos) << r.err;
  const std::string wl = Path("ok.yaml");
  std::ofstream(wl) << "concurrency: 2\n";
  r = Run({"-m", testing::kWp11m, "--workload", wl, "--prompt-len", "9"});  // both: which one?
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace tarmac
