// Runs the real tarmac binary: generate, tokenize, perplexity and their bad-input errors.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

const std::string kBin = std::string(TARMAC_BINARY_DIR) + "/bin/tarmac";
const std::string kModel = std::string(TARMAC_SOURCE_DIR) + "/models/wp-11m-f16.gguf";

struct CliRun {
  int code;
  std::string out;  // stdout only
};

CliRun Exec(const std::string& args) {
  const std::string cmd = kBin + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  CliRun r{-1, ""};
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(GenerateCliTest, GreedyIsDeterministicAndMatchesGoldenTokens) {
  // The golden greedy continuation of "Prince Andrew" starts with tokens 44 ","; the text must
  // be identical across thread counts and runs.
  CliRun a = Exec("generate -m " + kModel + " -p 'Prince Andrew' -n 24 --temp 0 -t 1");
  CliRun b = Exec("generate -m " + kModel + " -p 'Prince Andrew' -n 24 --temp 0 -t 2");
  ASSERT_EQ(a.code, 0);
  ASSERT_EQ(b.code, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out.rfind(",", 0), 0u) << a.out;
}

TEST(GenerateCliTest, SeedReproduces) {
  CliRun a = Exec("generate -m " + kModel + " -p 'The' -n 32 --seed 7 -t 2");
  CliRun b = Exec("generate -m " + kModel + " -p 'The' -n 32 --seed 7 -t 1");
  CliRun c = Exec("generate -m " + kModel + " -p 'The' -n 32 --seed 8 -t 2");
  ASSERT_EQ(a.code, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(GenerateCliTest, TokenizeMatchesGolden) {
  CliRun r = Exec("tokenize -m " + kModel + " -p 'Prince Andrew'");
  ASSERT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "1067 565\n");
  r = Exec("tokenize -m " + kModel + " -p 'Prince Andrew' --json");
  ASSERT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["id"], 565);
  EXPECT_EQ(j[1]["piece"], " Andrew");
}

TEST(GenerateCliTest, PerplexityOfOwnTextIsSane) {
  const std::string path = ::testing::TempDir() + "/ppl.txt";
  {
    std::ofstream out(path);
    for (int i = 0; i < 40; ++i)
      out << "Prince Andrew looked at Pierre and said nothing. The old prince was in the study. ";
  }
  CliRun r = Exec("perplexity -m " + kModel + " -f " + path + " -c 128 --chunks 2");
  ASSERT_EQ(r.code, 0);
  double ppl = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "perplexity: %lf", &ppl), 1) << r.out;
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 2048.0);  // better than uniform over the vocabulary
}

TEST(GenerateCliTest, PerplexityOnWarAndPeaceMatchesValidationLoss) {
  // The model's validation loss is 3.78 nats (perplexity 44); on a slice of its training text
  // it must land in the same region. A broken forward pass gives hundreds or more.
  const std::string corpus = std::string(TARMAC_SHARED_DIR) + "/data/war-and-peace.txt";
  std::ifstream in(corpus, std::ios::binary);
  if (!in) GTEST_SKIP() << corpus << " absent";
  std::string text(200000, '\0');
  in.read(text.data(), text.size());
  const std::string path = ::testing::TempDir() + "/wp_slice.txt";
  std::ofstream(path, std::ios::binary) << text.substr(100000);
  CliRun r = Exec("perplexity -m " + kModel + " -f " + path + " --chunks 4");
  ASSERT_EQ(r.code, 0);
  double ppl = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "perplexity: %lf", &ppl), 1) << r.out;
  EXPECT_GT(ppl, 15.0);
  EXPECT_LT(ppl, 60.0);
}

TEST(GenerateCliTest, BadInputExitsTwo) {
  EXPECT_EQ(Exec("generate -m /nonexistent.gguf -p x").code, 2);
  EXPECT_EQ(Exec("generate -m " + kModel + " -p x --top-p 3").code, 2);
  EXPECT_EQ(Exec("generate -m " + kModel + " -p x -n 100000").code, 2);
  EXPECT_EQ(Exec("generate -m " + kModel + " -p ''").code, 2);
  EXPECT_EQ(Exec("generate -m " + std::string(TARMAC_SOURCE_DIR) + "/README.md -p x").code, 2);
  EXPECT_EQ(Exec("perplexity -m " + kModel + " -f /nonexistent.txt").code, 2);
}

}  // namespace
