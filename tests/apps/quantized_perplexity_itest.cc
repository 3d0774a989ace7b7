// Quantized weights keep the model: wp-11m quantized to Q8_0 / Q4_0 / Q4_K / Q6_K by the real
// binary, then perplexity on a slice of War and Peace within a few percent of F16.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace {

const std::string kBin = std::string(TARMAC_BINARY_DIR) + "/bin/tarmac";
const std::string kModel = std::string(TARMAC_SOURCE_DIR) + "/models/wp-11m-f16.gguf";

std::pair<int, std::string> Exec(const std::string& args) {
  FILE* p = popen((kBin + " " + args + " 2>/dev/null").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

double Perplexity(const std::string& model, const std::string& text) {
  auto [code, out] = Exec("perplexity -m " + model + " -f " + text + " --chunks 6 -t 2");
  EXPECT_EQ(code, 0) << out;
  double ppl = 0;
  EXPECT_EQ(std::sscanf(out.c_str(), "perplexity: %lf", &ppl), 1) << out;
  return ppl;
}

TEST(QuantizedPerplexityTest, WithinAFewPercentOfF16) {
  const std::string corpus = std::string(TARMAC_SHARED_DIR) + "/data/war-and-peace.txt";
  std::ifstream in(corpus, std::ios::binary);
  if (!in) GTEST_SKIP() << corpus << " absent";
  std::string text(400000, '\0');
  in.read(text.data(), text.size());
  const std::string dir = ::testing::TempDir();
  const std::string slice = dir + "/wp_ppl_slice.txt";
  std::ofstream(slice, std::ios::binary) << text.substr(250000);

  const double f16 = Perplexity(kModel, slice);
  std::printf("f16: ppl %.4f\n", f16);
  // Allowed relative increase per format. Q4_K on this model's 384-wide rows falls back to
  // Q8_0 for most tensors (K-quants need rows that are multiples of 256).
  const std::map<std::string, double> limits = {
      {"q8_0", 0.005}, {"q6_k", 0.01}, {"q4_k", 0.03}, {"q4_0", 0.04}};
  for (const auto& [type, limit] : limits) {
    const std::string out = dir + "/wp-11m-" + type + ".gguf";
    auto [code, msg] = Exec("gguf quantize " + kModel + " " + out + " --type " + type);
    ASSERT_EQ(code, 0) << msg;
    const double q = Perplexity(out, slice);
    std::printf("%s: ppl %.4f (%+.2f%% vs f16)\n", type.c_str(), q, 100 * (q / f16 - 1));
    EXPECT_LT(q, f16 * (1 + limit)) << type;
    EXPECT_GT(q, f16 * (1 - limit)) << type;
    std::remove(out.c_str());
  }
}

}  // namespace
