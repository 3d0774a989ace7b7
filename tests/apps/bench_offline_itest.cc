// Runs `tarmac bench offline` for real: the JSON report has the documented fields and sane
// values, the shared prefix is served from the cache, the quote workload is copy-heavy, and bad
// flags exit 2 with a message.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"

namespace tarmac {
namespace {

class BenchOfflineTest : public testing::TempDirTest {
 protected:
  testing::RunResult Run(std::vector<std::string> args) { return testing::RunTarmac(std::move(args), dir_.string()); }
};

TEST_F(BenchOfflineTest, JsonReportHasEveryField) {
  auto r = Run({"bench", "offline", "-m", testing::kWp11m, "--requests", "8", "--concurrency",
                "4", "--prompt-len", "16", "--output-len", "8", "--shared-prefix", "48",
                "--length-spread", "0.5", "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"output_tokens_per_s", "kv_waste", "prefix_hit_tokens",
                        "prefill_tokens_saved", "preemptions", "max_concurrent_running"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"ttft_ms", "tpot_ms"})
    for (const char* p : {"p50", "p95", "p99"}) EXPECT_TRUE(j[k].contains(p)) << k << "." << p;
  EXPECT_GT(j["output_tokens_per_s"].get<double>(), 0.0);
  EXPECT_LE(j["max_concurrent_running"].get<int>(), 4);
  EXPECT_GE(j["kv_waste"].get<double>(), 0.0);
  EXPECT_LT(j["kv_waste"].get<double>(), 1.0);
  // 48 shared tokens = 3 blocks; every request after the first finds them cached.
  EXPECT_GE(j["prefix_hit_tokens"].get<int64_t>(), 48);
  EXPECT_EQ(j["prefill_tokens_saved"], j["prefix_hit_tokens"]);
  // The per-bucket SLO table counts the measured requests only (not the warm-up).
  const auto& slo_buckets = j["slo_report"]["models"][0]["buckets"];
  int64_t measured = 0;
  for (const auto& b : slo_buckets) measured += b["total"]["requests"].get<int64_t>();
  EXPECT_EQ(measured, 8) << slo_buckets.dump();

  r = Run({"bench", "offline", "-m", testing::kWp11m, "--requests", "4", "--prompt-len", "16",
           "--output-len", "4", "--shared-prefix", "48", "--no-prefix-cache", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["prefix_hit_tokens"].get<int64_t>(), 0);
}

// --constrain puts the grammar on the requests (compile time reported); with
// --constrain-every 2 half of them, under their own task, so one run's buckets compare both.
TEST_F(BenchOfflineTest, ConstrainEveryNSplitsTheBuckets) {
  auto r = Run({"bench", "offline", "-m", testing::kWp11m, "--requests", "4", "--concurrency", "1", "--prompt-len", "16",
                "--output-len", "6", "-t", "1", "--constrain", "regex:[0-9]+", "--constrain-every", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["constrain"], "regex:[0-9]+");
  EXPECT_GT(j["grammar_compile_ms"].get<double>(), 0.0);
  int constrained = 0, free = 0;
  for (auto it = j["buckets"].begin(); it != j["buckets"].end(); ++it) {
    const bool c = it.key().find("task=random-constrained ") != std::string::npos;
    (c ? constrained : free) += it.value()["requests"].get<int>();
  }
  EXPECT_EQ(constrained, 2);
  EXPECT_EQ(free, 2);
  // Every request constrained by default: one task.
  r = Run({"bench", "offline", "-m", testing::kWp11m, "--requests", "2", "--prompt-len", "16", "--output-len", "4", "-t", "1",
           "--constrain", "json_object", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  for (auto it = j["buckets"].begin(); it != j["buckets"].end(); ++it)
    EXPECT_EQ(it.key().find("-constrained"), std::string::npos) << it.key();
}

// The quote workload (prompt = passage P, the model's own continuation C, P again) is
// copy-heavy for real: n-gram lookup finds most of the answer in the prompt. Measured: 0.73
// at seed 1 (0.51-0.87 over seeds 1-8); the `copy` workload gives 0.06-0.21 here.
TEST_F(BenchOfflineTest, QuoteWorkloadNgramAcceptsMostDrafts) {
  const std::string corpus = testing::kSharedDir + "/data/war-and-peace.txt";
  if (!std::ifstream(corpus)) GTEST_SKIP() << corpus << " absent";
  auto r = Run({"bench", "offline", "-m", testing::kWp11m, "--requests", "4", "--concurrency",
                "4", "--prompt-len", "48", "--output-len", "24", "--workload", "quote",
                "--prompt-file", corpus, "--spec", "ngram", "--spec-k", "4", "-t", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["acceptance_rate"].get<double>(), 0.45) << r.out;
  EXPECT_EQ(j["prompt_tokens"].get<int64_t>(), 4 * (48 + 24 + 48));  // P + C + P
  EXPECT_EQ(j["prefix_hit_tokens"].get<int64_t>(), 0);  // C was generated in another namespace
  // One request bucket (120-token prompts, 24 tokens out), the engine's definition: its key and
  // labels as the registry has them.
  ASSERT_EQ(j["buckets"].size(), 1u) << j["buckets"].dump();
  EXPECT_EQ(j["buckets"].begin().key(), "task=quote sla=standard prompt=0-127 output=1-63 T=0 risk=low priority=normal");
  EXPECT_EQ(j["buckets"].begin().value()["labels"]["task"], "quote");
  EXPECT_GT(j["buckets"].begin().value()["spec"]["draft_tokens"].get<int64_t>(), 0);

  // P + C + P + output beyond the context (512) is refused.
  r = Run({"bench", "offline", "-m", testing::kWp11m, "--requests", "1", "--prompt-len", "200",
           "--output-len", "60", "--workload", "quote", "--prompt-file", corpus});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--output-len"), std::string::npos) << r.err;
}

// A float draft is quantized to Q8_0 at load unless --draft-type keep; a draft that is
// already quantized loads as it is. Greedy drafts of wp-1m agree either way here, so both
// report the same acceptance; a bad value is refused.
TEST_F(BenchOfflineTest, FloatDraftIsQuantizedToQ8_0UnlessKept) {
  const std::vector<std::string> base = {
      "bench", "offline", "-m", testing::kWp11m, "--requests", "2", "--prompt-len", "16",
      "--output-len", "12", "--spec", "draft", "--spec-k", "2", "-t", "1", "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return Run(args);
  };
  auto r = with({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto q = nlohmann::json::parse(r.out);
  EXPECT_TRUE(q["draft_quantized_q8_0"].get<bool>());
  // The default draft beside wp-11m: the distilled one.
  EXPECT_NE(q["draft_model"].get<std::string>().find("wp-1m-distill-f16.gguf"), std::string::npos);
  EXPECT_GT(q["draft_seconds"].get<double>(), 0.0);
  // wp-1m drafts the same tokens as Q8_0 and as stored on these prompts (the distilled draft's
  // close logits do not always: 0.39 against 0.32 accepted here).
  const std::string wp1m = TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf";
  r = with({"--draft-model", wp1m});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto q1 = nlohmann::json::parse(r.out);
  EXPECT_TRUE(q1["draft_quantized_q8_0"].get<bool>());
  r = with({"--draft-model", wp1m, "--draft-type", "keep"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto k = nlohmann::json::parse(r.out);
  EXPECT_FALSE(k["draft_quantized_q8_0"].get<bool>());
  EXPECT_EQ(k["acceptance_rate"], q1["acceptance_rate"]);
  // Already quantized: nothing to do.
  const std::string q4 = (dir_ / "wp-1m-q4_0.gguf").string();
  ASSERT_EQ(Run({"gguf", "quantize", wp1m, q4, "--type", "q4_0"}).exit_code, 0);
  r = with({"--draft-model", q4});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out)["draft_quantized_q8_0"].get<bool>());
  // wp-1m stays selectable; token trees by flag, bad shapes refused by name.
  r = with({"--draft-model", wp1m, "--spec-tree", "2x2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto t = nlohmann::json::parse(r.out);
  EXPECT_NE(t["draft_model"].get<std::string>().find("wp-1m-f16.gguf"), std::string::npos);
  EXPECT_EQ(t["spec_tree"], "2x2");
  r = with({"--spec-tree", "9x2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--spec-tree"), std::string::npos) << r.err;
  EXPECT_DOUBLE_EQ(q["spec_max_slowdown"].get<double>(), 0.05);  // the policy's default
  r = with({"--spec-max-slowdown", "-1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["spec_max_slowdown"].get<double>(), -1.0);
  r = with({"--spec-max-slowdown", "fast"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--spec-max-slowdown"), std::string::npos) << r.err;
  r = with({"--draft-type", "fp8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--draft-type"), std::string::npos) << r.err;
  // Quantizing is only a speed-up: with no writable temporary directory the draft loads as
  // stored, with a warning, and speculation still runs.
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", "/proc", 1);
  r = with({});
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out)["draft_quantized_q8_0"].get<bool>());
  EXPECT_NE(r.err.find("not quantized to Q8_0"), std::string::npos) << r.err;
}

TEST_F(BenchOfflineTest, BadFlagsExitTwoWithAMessage) {
  const std::vector<std::vector<std::string>> bad = {
      {"bench", "offline", "-m", testing::kWp11m, "--prompt-len", "600"},  // beyond context 512
      {"bench", "offline", "-m", testing::kWp11m, "--kv-memory", "0.0000001"},
      {"bench", "offline", "-m", testing::kWp11m, "--kv-dtype", "fp8"},
      {"bench", "offline", "-m", testing::kWp11m, "--requests", "0"},
  };
  for (const auto& args : bad) {
    auto r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << args.back();
  }
}

}  // namespace
}  // namespace tarmac
