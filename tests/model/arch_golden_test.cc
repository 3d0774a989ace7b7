// Every model family against llama.cpp, without llama.cpp: tests/data/arch/*.golden.json hold
// llama.cpp's outputs (node-llama-cpp 3.21.1, written by bench/compare_arch.sh
// --write-goldens) for random-weight files our make-random writes; each test regenerates its
// file with the same family, shape, type and seed, runs it and compares:
//   - the prompt's log-probabilities at every position (llama.cpp's top 4 tokens), within
//     kLogProbTol: f32 weights, but llama.cpp rounds K/V, Q and the attention weights to f16
//     and takes GELU from an f16 table (bench/NOTES.md has the differences measured);
//   - 64 greedy steps, teacher-forced with llama.cpp's tokens: our argmax is llama.cpp's
//     token, or the two are within kNearTie nats (by llama.cpp's top-2 margin or our gap);
//   - perplexity of a 256-token slice, within 0.5%.
// The windowed families' windows (20-24) are shorter than the sequences (96 and 256 tokens);
// gemma2-caps soft-caps scores and logits hard enough to matter; phi3-partial rotates 24 of 32
// head dims.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "common/arch_golden.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "model/llama_model.h"
#include "model/sequence_runner.h"

namespace tarmac::model {
namespace {

const std::string kRepo = TARMAC_SOURCE_DIR;
constexpr double kLogProbTol = 5e-3;
constexpr double kNearTie = 0.02;

std::vector<double> LogSoftmax(const float* l, int32_t n) {
  double mx = l[0];
  for (int32_t i = 1; i < n; ++i) mx = std::max(mx, double{l[i]});
  double z = 0;
  for (int32_t i = 0; i < n; ++i) z += std::exp(l[i] - mx);
  std::vector<double> out(n);
  for (int32_t i = 0; i < n; ++i) out[i] = l[i] - mx - std::log(z);
  return out;
}

class ArchGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchGoldenTest, MatchesLlamaCpp) {
  const std::string name = GetParam();
  std::ifstream in(kRepo + "/tests/data/arch/" + name + ".golden.json");
  ASSERT_TRUE(in.good()) << "golden file for " << name << " missing";
  const auto golden = nlohmann::json::parse(in);
  EXPECT_EQ(golden["make_random"]["type"], "f32");
  const std::string path = testing::RegenerateArchGolden(golden["make_random"], name, "arch_golden");
  const int32_t context = golden["context"].get<int32_t>();
  auto model = LlamaModel::Load(path, /*use_mmap=*/true, context);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  LlamaModel& m = **model;
  const int32_t V = m.config().n_vocab;
  ThreadPool pool(2);
  SequenceRunner runner(&m, context, &pool);
  std::vector<float> logits;
  double max_lp = 0;
  int agree = 0, ties = 0;
  for (const auto& c : golden["cases"]) {
    const auto prompt = c["tokens"].get<std::vector<int32_t>>();
    runner.Reset();
    ASSERT_TRUE(runner.Append(prompt, /*all_logits=*/true, &logits).ok());
    for (size_t p = 0; p < prompt.size(); ++p) {
      const auto lp = LogSoftmax(&logits[p * V], V);
      for (const auto& pair : c["top_logprobs"][p]) {
        const double want = pair[1];
        ASSERT_NEAR(lp[pair[0].get<int32_t>()], want, kLogProbTol)
            << name << " prompt position " << p << " token " << pair[0];
        max_lp = std::max(max_lp, std::fabs(lp[pair[0].get<int32_t>()] - want));
      }
    }
    std::vector<float> last(logits.end() - V, logits.end());
    const auto greedy = c["greedy"].get<std::vector<int32_t>>();
    const auto margin = c["greedy_margin"].get<std::vector<double>>();
    for (size_t s = 0; s < greedy.size(); ++s) {
      const int32_t ours =
          static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      const double gap = double{last[ours]} - double{last[greedy[s]]};
      if (ours == greedy[s]) {
        ++agree;
      } else {
        ASSERT_TRUE(margin[s] <= kNearTie || gap <= kNearTie)
            << name << " greedy step " << s << ": llama.cpp " << greedy[s] << " (margin "
            << margin[s] << "), ours " << ours << " (" << gap << " above it)";
        ++ties;
      }
      const int32_t one[1] = {greedy[s]};
      ASSERT_TRUE(runner.Append(one, false, &last).ok());
    }
  }
  const auto ppl_tokens = golden["ppl"]["tokens"].get<std::vector<int32_t>>();
  runner.Reset();
  ASSERT_TRUE(runner.Append(ppl_tokens, /*all_logits=*/true, &logits).ok());
  double nll = 0;
  for (size_t i = 0; i + 1 < ppl_tokens.size(); ++i)
    nll -= LogSoftmax(&logits[i * V], V)[ppl_tokens[i + 1]];
  const double ppl = std::exp(nll / static_cast<double>(ppl_tokens.size() - 1));
  const double want = golden["ppl"]["value"].get<double>();
  EXPECT_NEAR(ppl, want, 0.005 * want) << name;
  EXPECT_GT(agree, 0);
  std::printf("%s: max |dlogp| %.2e, greedy %d equal + %d near-ties, ppl %.4f vs %.4f\n",
              name.c_str(), max_lp, agree, ties, ppl, want);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Families, ArchGoldenTest,
                         ::testing::ValuesIn(testing::kArchGoldens), testing::ArchGoldenParamName);

}  // namespace
}  // namespace tarmac::model
