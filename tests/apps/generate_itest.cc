// Runs the real tarmac binary: generate, tokenize, perplexity and their bad-input errors.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/test_util.h"

namespace tarmac {
namespace {

using testing::kWp11m;

class GenerateCliTest : public testing::TempDirTest {
 protected:
  testing::RunResult Run(std::vector<std::string> args) {
    return testing::RunTarmac(std::move(args), dir_.string());
  }
  double Perplexity(const std::string& model, const std::string& text,
                    std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"perplexity", "-m", model, "-f", text};
    args.insert(args.end(), extra.begin(), extra.end());
    testing::RunResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    double ppl = 0;
    EXPECT_EQ(std::sscanf(r.out.c_str(), "perplexity: %lf", &ppl), 1) << r.out;
    return ppl;
  }
};

TEST_F(GenerateCliTest, GreedyIsDeterministicAndMatchesGoldenTokens) {
  // The golden greedy continuation of "Prince Andrew" starts with token 44 ","; the text must
  // be identical across thread counts and runs.
  auto a = Run({"generate", "-m", kWp11m, "-p", "Prince Andrew", "-n", "24", "--temp", "0", "-t", "1"});
  auto b = Run({"generate", "-m", kWp11m, "-p", "Prince Andrew", "-n", "24", "--temp", "0", "-t", "2"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind(",", 0), 0u) << a.out;
  EXPECT_NE(a.err.find("decode:"), std::string::npos) << a.err;  // tok/s report on stderr
}

TEST_F(GenerateCliTest, SeedReproduces) {
  auto a = Run({"generate", "-m", kWp11m, "-p", "The", "-n", "32", "--seed", "7", "-t", "2"});
  auto b = Run({"generate", "-m", kWp11m, "-p", "The", "-n", "32", "--seed", "7", "-t", "1"});
  auto c = Run({"generate", "-m", kWp11m, "-p", "The", "-n", "32", "--seed", "8", "-t", "2"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST_F(GenerateCliTest, TokenizeMatchesGolden) {
  auto r = Run({"tokenize", "-m", kWp11m, "-p", "Prince Andrew"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1067 565\n");
  r = Run({"tokenize", "-m", kWp11m, "-p", "Prince Andrew", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["id"], 565);
  EXPECT_EQ(j[1]["piece"], " Andrew");
}

TEST_F(GenerateCliTest, PerplexityOfOwnTextIsSane) {
  const std::string path = Path("ppl.txt");
  {
    std::ofstream out(path);
    for (int i = 0; i < 40; ++i)
      out << "Prince Andrew looked at Pierre and said nothing. The old prince was in the study. ";
  }
  const double ppl = Perplexity(kWp11m, path, {"-c", "128", "--chunks", "2"});
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 2048.0);  // better than uniform over the vocabulary
}

TEST_F(GenerateCliTest, PerplexityOnWarAndPeaceMatchesValidationLoss) {
  // The model's validation loss is 3.78 nats (perplexity 44); on a slice of its training text
  // it must land in the same region. A broken forward pass gives hundreds or more.
  const std::string corpus = testing::kSharedDir + "/data/war-and-peace.txt";
  std::ifstream in(corpus, std::ios::binary);
  if (!in) GTEST_SKIP() << corpus << " absent";
  std::string text(200000, '\0');
  in.read(text.data(), text.size());
  const std::string path = Path("wp_slice.txt");
  std::ofstream(path, std::ios::binary) << text.substr(100000);
  const double ppl = Perplexity(kWp11m, path, {"--chunks", "4"});
  EXPECT_GT(ppl, 15.0);
  EXPECT_LT(ppl, 60.0);
}

// int8 KV (per-block, per-head scales) costs at most 1% perplexity against f16 KV.
TEST_F(GenerateCliTest, Int8KvPerplexityWithinOnePercentOfF16) {
  const std::string corpus = testing::kSharedDir + "/data/war-and-peace.txt";
  std::ifstream in(corpus, std::ios::binary);
  if (!in) GTEST_SKIP() << corpus << " absent";
  std::string text(120000, '\0');
  in.read(text.data(), text.size());
  const std::string path = Path("wp_slice_kv.txt");
  std::ofstream(path, std::ios::binary) << text.substr(60000);
  const double f16 = Perplexity(kWp11m, path, {"--chunks", "4", "--kv-dtype", "f16"});
  const double i8 = Perplexity(kWp11m, path, {"--chunks", "4", "--kv-dtype", "int8"});
  std::printf("wp-11m perplexity: f16 KV %.4f, int8 KV %.4f (%+.3f%%)\n", f16, i8,
              100.0 * (i8 / f16 - 1.0));
  EXPECT_LT(std::abs(i8 / f16 - 1.0), 0.01);
}

TEST_F(GenerateCliTest, BadInputExitsTwoWithAMessage) {
  const std::vector<std::vector<std::string>> bad = {
      {"generate", "-m", "/nonexistent.gguf", "-p", "x"},
      {"generate", "-m", kWp11m, "-p", "x", "--top-p", "3"},
      {"generate", "-m", kWp11m, "-p", "x", "-n", "100000"},
      {"generate", "-m", kWp11m, "-p", ""},
      {"generate", "-m", TARMAC_SOURCE_DIR "/README.md", "-p", "x"},
      {"perplexity", "-m", kWp11m, "-f", "/nonexistent.txt"},
      {"bench", "model", "-m", kWp11m, "--threads", "0"},
      {"bench", "model", "-m", kWp11m, "--steps", "0"},
      {"bench", "model", "-m", kWp11m, "--steps", "4,x"},
  };
  for (const auto& args : bad) {
    auto r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args.back();
    EXPECT_FALSE(r.err.empty()) << args[0] << " " << args.back();
  }
}

TEST_F(GenerateCliTest, BenchModelPrintsJson) {
  auto r = Run({"bench", "model", "-m", kWp11m, "--prompt-tokens", "32", "--decode", "8",
                "--reps", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["prefill_tok_s"].get<double>(), 0.0);
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0.0);
}

// --read-bandwidth: a probe after each repetition; the reported fraction is the median of the
// repetitions' own ratios (bytes a step reads x that decode's tok/s over that probe), not a ratio
// of medians.
TEST_F(GenerateCliTest, BenchModelReadBandwidthFraction) {
  auto r = Run({"bench", "model", "-m", kWp11m, "--prompt-tokens", "8", "--decode", "8",
                "--reps", "3", "--json", "--read-bandwidth"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  auto decode = j["decode_tok_s_reps"].get<std::vector<double>>();
  const auto reads = j["read_bytes_per_s_reps"].get<std::vector<double>>();
  ASSERT_EQ(decode.size(), 3u) << r.out;
  ASSERT_EQ(reads.size(), 3u) << r.out;
  const double bytes = j["active_weight_bytes"].get<double>();  // what a decode step reads
  std::vector<double> ratios;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_GT(reads[i], 0.0);
    ratios.push_back(decode[i] * bytes / reads[i]);
  }
  std::sort(ratios.begin(), ratios.end());
  EXPECT_NEAR(j["decode_read_fraction"].get<double>(), ratios[1], 1e-9 * ratios[1]) << r.out;
  std::sort(decode.begin(), decode.end());
  EXPECT_DOUBLE_EQ(j["decode_tok_s"].get<double>(), decode[1]);
}

// --steps: one median per size, keyed by the size, every one a positive time.
TEST_F(GenerateCliTest, BenchModelStepCurve) {
  auto r = Run({"bench", "model", "-m", kWp11m, "--steps", "1,3,8", "--reps", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["step_ms"].size(), 3u) << r.out;
  for (const char* n : {"1", "3", "8"}) EXPECT_GT(j["step_ms"][n].get<double>(), 0.0) << n;
}

}  // namespace
}  // namespace tarmac
