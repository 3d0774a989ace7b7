// Files in llama.cpp's quantization mixes (q5_k_m, q3_k_m, iq4_xs: Q5_K/Q6_K, Q3_K/Q4_K/Q5_K,
// IQ4_XS tensors, and wp-11m's 384-wide rows falling back to Q5_0/Q5_1/IQ4_NL) served through
// the OpenAI API next to the f16 original: each mix's greedy continuation of held-out text
// (the book's last 50,000 bytes) follows f16's token for token up to the first near-tie, a
// position where f16's own top two tokens lie closer than the mix's measured logit noise allows.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "server_test_util.h"

namespace tarmac::testing {
namespace {

using Json = nlohmann::json;

struct Step {
  std::string token;
  double logprob = 0;  // of the chosen token
  double margin = 0;   // chosen minus runner-up
};

std::vector<Step> Greedy(int port, const std::string& model, const std::string& prompt, int n) {
  const Json body = {{"model", model},     {"prompt", prompt},   {"max_tokens", n},
                     {"temperature", 0},   {"logprobs", 2},      {"ignore_eos", true}};
  const HttpResponse r = Post(port, "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << model << ": " << r.body;
  std::vector<Step> out;
  if (r.status != 200) return out;
  const Json lp = Json::parse(r.body)["choices"][0]["logprobs"];
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    Step s;
    s.token = lp["tokens"][i];
    s.logprob = lp["token_logprobs"][i];
    std::vector<double> top;
    for (const auto& [tok, v] : lp["top_logprobs"][i].items()) top.push_back(v.get<double>());
    std::sort(top.rbegin(), top.rend());
    s.margin = top.size() > 1 ? top[0] - top[1] : 1e9;
    out.push_back(s);
  }
  return out;
}

class QuantMixServeTest : public TempDirTest {};

TEST_F(QuantMixServeTest, MixesFollowF16UpToTheFirstNearTie) {
  const std::string text = Slurp(kSharedDir + "/data/war-and-peace.txt");
  if (text.size() < 60000) GTEST_SKIP() << "no ../shared/data/war-and-peace.txt";
  const std::string held_out = text.substr(text.size() - 50000);
  struct Mix {
    const char* name;
    double noise_bound;  // largest |logprob difference| from f16 the mix may show (nats)
  };
  // Bounds about 1.5x the largest differences measured (q5_k_m 0.133, iq4_xs 0.169, q3_k_m
  // 0.148 nats): a block decoded wrongly moves logprobs by whole nats.
  const Mix mixes[] = {{"q5_k_m", 0.2}, {"iq4_xs", 0.25}, {"q3_k_m", 0.25}};
  std::string config = "models:\n  - {path: " + kWp11m + ", name: f16}\n";
  for (const Mix& m : mixes) {
    const std::string out = Path(std::string(m.name) + ".gguf");
    const RunResult q = RunTarmac({"gguf", "quantize", kWp11m, out, "--type", m.name}, dir_.string());
    ASSERT_EQ(q.exit_code, 0) << q.err;
    config += fmt::format("  - {{path: {}, name: {}}}\n", out, m.name);
  }
  std::ofstream(Path("tarmac.yaml")) << config;
  ServerProcess srv({"--config", Path("tarmac.yaml"), "--no-warmup"}, Path("server.log"),
                    /*with_default_model=*/false);
  ASSERT_TRUE(srv.WaitReady()) << Slurp(Path("server.log"));
  constexpr int kPrompts = 4, kTokens = 24;
  for (const Mix& m : mixes) {
    int agreed = 0, compared = 0;
    double noise = 0;
    for (int p = 0; p < kPrompts; ++p) {
      // Start at a sentence: the first ". " after each of four evenly spaced offsets.
      const size_t at = held_out.find(". ", 2000 + p * 11000) + 2;
      const std::string prompt = held_out.substr(at, 300);
      const std::vector<Step> ref = Greedy(srv.port(), "f16", prompt, kTokens);
      const std::vector<Step> got = Greedy(srv.port(), m.name, prompt, kTokens);
      ASSERT_EQ(ref.size(), static_cast<size_t>(kTokens));
      ASSERT_EQ(got.size(), static_cast<size_t>(kTokens));
      for (int i = 0; i < kTokens; ++i) {
        ++compared;
        if (got[i].token == ref[i].token) {
          ++agreed;
          noise = std::max(noise, std::fabs(got[i].logprob - ref[i].logprob));
          continue;
        }
        // A divergence is allowed only where f16 itself nearly tied: its top two closer than
        // twice the mix's noise bound (a logit error of that size can swap them).
        EXPECT_LT(ref[i].margin, 2 * m.noise_bound)
            << m.name << " prompt " << p << " step " << i << ": f16 '" << ref[i].token << "' (margin "
            << ref[i].margin << ") vs '" << got[i].token << "'";
        break;  // the continuations differ from here on
      }
    }
    std::printf("%s: %d of %d compared steps agree; largest |logprob - f16's| on them %.3f nats\n",
                m.name, agreed, compared, noise);
    EXPECT_LE(noise, m.noise_bound) << m.name;
    EXPECT_GE(agreed, compared / 2) << m.name;
  }
}

}  // namespace
}  // namespace tarmac::testing
