// Quantized weights keep the model: wp-11m quantized to Q8_0 / Q4_0 / Q4_K / Q6_K by the real
// binary, then perplexity on a slice of War and Peace within a few percent of F16.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "common/test_util.h"

namespace tarmac {
namespace {

class QuantizedPerplexityTest : public testing::TempDirTest {
 protected:
  double Perplexity(const std::string& model, const std::string& text) {
    auto r = testing::RunTarmac({"perplexity", "-m", model, "-f", text, "--chunks", "6", "-t", "2"},
                                dir_.string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    double ppl = 0;
    EXPECT_EQ(std::sscanf(r.out.c_str(), "perplexity: %lf", &ppl), 1) << r.out;
    return ppl;
  }
};

TEST_F(QuantizedPerplexityTest, WithinAFewPercentOfF16) {
  const std::string corpus = testing::kSharedDir + "/data/war-and-peace.txt";
  std::ifstream in(corpus, std::ios::binary);
  if (!in) GTEST_SKIP() << corpus << " absent";
  std::string text(400000, '\0');
  in.read(text.data(), text.size());
  const std::string slice = Path("wp_ppl_slice.txt");
  std::ofstream(slice, std::ios::binary) << text.substr(250000);

  const double f16 = Perplexity(testing::kWp11m, slice);
  std::printf("f16: ppl %.4f\n", f16);
  // Allowed relative change per format. Q4_K/Q6_K on this model's 384-wide rows fall back to
  // Q8_0 for most tensors (K-quants need rows that are multiples of 256).
  const std::map<std::string, double> limits = {
      {"q8_0", 0.005}, {"q6_k", 0.01}, {"q4_k", 0.03}, {"q4_0", 0.04}};
  for (const auto& [type, limit] : limits) {
    const std::string out = Path("wp-11m-" + type + ".gguf");
    auto r = testing::RunTarmac({"gguf", "quantize", testing::kWp11m, out, "--type", type},
                                dir_.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const double q = Perplexity(out, slice);
    std::printf("%s: ppl %.4f (%+.2f%% vs f16)\n", type.c_str(), q, 100 * (q / f16 - 1));
    EXPECT_LT(q, f16 * (1 + limit)) << type;
    EXPECT_GT(q, f16 * (1 - limit)) << type;
  }
}

}  // namespace
}  // namespace tarmac
