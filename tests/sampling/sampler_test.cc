#include "sampling/sampler.h"

#include <cmath>
#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

namespace tarmac::sampling {
namespace {

SamplingParams Params(float temp, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temp;
  p.seed = seed;
  return p;
}

TEST(SamplerTest, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_NE(p.Validate(10).message().find("top_p"), std::string::npos);
  p = {};
  p.temperature = -1;
  EXPECT_NE(p.Validate(10).message().find("temperature"), std::string::npos);
  p = {};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(p.Validate(10).message().find("logit_bias"), std::string::npos);
  p = {};
  p.top_logprobs = 21;
  EXPECT_FALSE(p.Validate(10).ok());
  EXPECT_TRUE(SamplingParams{}.Validate(10).ok());
}

TEST(SamplerTest, GreedyIsArgmaxFirstAmongEquals) {
  Sampler s(Params(0), 5);
  std::vector<float> logits = {1, 3, 2, 3, -1};
  EXPECT_EQ(s.Sample(logits).id, 1);
}

// ArgMax is the vectorized kernel: over vocabulary-sized rows (and the lengths around a vector
// and its tails) it picks what a scalar first-max loop picks, ties and -inf rows included.
TEST(SamplerTest, ArgMaxMatchesAScalarFirstMaxLoop) {
  auto scalar = [](const std::vector<float>& x) {
    int32_t best = 0;
    for (int32_t i = 1; i < static_cast<int32_t>(x.size()); ++i)
      if (x[i] > x[best]) best = i;
    return best;
  };
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 32000, 128256}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = std::round(normal(rng));  // rounded: many ties at the top
    EXPECT_EQ(ArgMax(x), scalar(x)) << n;
    x.assign(static_cast<size_t>(n), -INFINITY);  // a fully masked row
    EXPECT_EQ(ArgMax(x), 0) << n;
    x[static_cast<size_t>(n - 1)] = -1e30f;  // one allowed id, last
    EXPECT_EQ(ArgMax(x), n - 1) << n;
  }
}

TEST(SamplerTest, SameSeedSameTokens) {
  std::vector<float> base = {0.1f, 0.5f, 0.2f, 0.9f, 0.3f, 0.0f, 0.7f};
  auto run = [&](uint64_t seed) {
    Sampler s(Params(1.0f, seed), 7);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) {
      auto l = base;
      out.push_back(s.Sample(l).id);
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(SamplerTest, MatchesSoftmaxStatistically) {
  // Chi-square goodness of fit of 40000 draws against softmax(logits / T).
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  const float temp = 0.8f;
  Sampler s(Params(temp, 7), 5);
  std::vector<int> counts(5);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    counts[s.Sample(l).id]++;
  }
  double z = 0;
  for (float l : logits) z += std::exp(l / temp);
  double chi2 = 0;
  for (int i = 0; i < 5; ++i) {
    const double e = n * std::exp(logits[i] / temp) / z;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_LT(chi2, 18.47);  // p = 0.001 at 4 degrees of freedom
}

TEST(SamplerTest, FiltersKeepTheRightSets) {
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f, -1.0f};
  std::vector<float> probs(5);
  SamplingParams p = Params(1.0f);
  p.top_k = 2;
  Sampler(p, 5).Distribution(logits, probs);
  EXPECT_GT(probs[0], 0);
  EXPECT_GT(probs[1], 0);
  EXPECT_EQ(probs[2], 0);
  EXPECT_NEAR(probs[0] + probs[1], 1.0, 1e-6);
  EXPECT_NEAR(probs[0] / probs[1], std::exp(1.0), 1e-4);

  p = Params(1.0f);
  p.top_p = 0.6f;  // softmax: 0.636, 0.234, ...: the first alone reaches 0.6
  Sampler(p, 5).Distribution(logits, probs);
  EXPECT_FLOAT_EQ(probs[0], 1.0f);

  p = Params(1.0f);
  p.min_p = 0.3f;  // keeps p >= 0.3 * p_max: e^-1 = 0.37 passes, e^-2 = 0.135 does not
  Sampler(p, 5).Distribution(logits, probs);
  EXPECT_GT(probs[1], 0);
  EXPECT_EQ(probs[2], 0);
}

TEST(SamplerTest, PenaltiesAndBias) {
  SamplingParams p = Params(0);
  p.repetition_penalty = 2.0f;
  Sampler s(p, 3);
  std::vector<int32_t> prompt = {0};
  s.AddPrompt(prompt);
  std::vector<float> l = {4.0f, 3.0f, -1.0f};
  s.ApplyProcessors(l);
  EXPECT_FLOAT_EQ(l[0], 2.0f);
  EXPECT_FLOAT_EQ(l[1], 3.0f);

  p = Params(0);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 1.0f;
  Sampler s2(p, 3);
  s2.AddPrompt(prompt);  // prompt tokens do not count for presence/frequency
  s2.Accept(1);
  s2.Accept(1);
  l = {4.0f, 3.0f, -1.0f};
  s2.ApplyProcessors(l);
  EXPECT_FLOAT_EQ(l[0], 4.0f);
  EXPECT_FLOAT_EQ(l[1], 3.0f - 0.5f - 2.0f);

  p = Params(0);
  p.logit_bias = {{0, -100.0f}, {2, 10.0f}};
  Sampler s3(p, 3);
  l = {4.0f, 3.0f, -1.0f};
  EXPECT_EQ(s3.Sample(l).id, 2);
}

TEST(SamplerTest, LogprobsOfTheRawDistribution) {
  SamplingParams p = Params(0);
  p.top_logprobs = 2;
  Sampler s(p, 3);
  std::vector<float> l = {0.0f, std::log(3.0f), 0.0f};  // probs 0.2, 0.6, 0.2
  auto r = s.Sample(l);
  EXPECT_EQ(r.id, 1);
  EXPECT_NEAR(r.logprob, std::log(0.6), 1e-6);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].id, 1);
  EXPECT_EQ(r.top[1].id, 0);
  EXPECT_NEAR(r.top[1].logprob, std::log(0.2), 1e-6);
}

TEST(TopLogprobsTest, MatchesASortedReferenceWithTies) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t V = 1 + static_cast<int32_t>(rng() % 300);
    std::vector<float> logits(static_cast<size_t>(V));
    for (float& x : logits) x = static_cast<float>(static_cast<int>(rng() % 40) - 20) * 0.5f;  // many ties
    const int32_t n = 1 + static_cast<int32_t>(rng() % 20);
    SampleResult r;
    TopLogprobs(logits, n, 0, &r);
    std::vector<int32_t> ref(static_cast<size_t>(V));
    std::iota(ref.begin(), ref.end(), 0);
    std::stable_sort(ref.begin(), ref.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    ASSERT_EQ(static_cast<int32_t>(r.top.size()), std::min(n, V));
    double z = 0;
    for (float x : logits) z += std::exp(static_cast<double>(x));
    for (size_t i = 0; i < r.top.size(); ++i) {
      ASSERT_EQ(r.top[i].id, ref[i]) << "trial " << trial << " rank " << i;
      EXPECT_NEAR(r.top[i].logprob, logits[ref[i]] - std::log(z), 1e-4);
    }
    EXPECT_NEAR(r.logprob, logits[0] - std::log(z), 1e-4);
  }
}

TEST(TopLogprobsTest, LogprobsDescribeTheRawLogitsWithOrWithoutProcessors) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f};
  for (bool biased : {false, true}) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.top_logprobs = 2;
    if (biased) p.logit_bias = {{0, 10.0f}};  // makes token 0 the choice
    Sampler s(p, 4);
    std::vector<float> row = logits;
    SampleResult r = s.Sample(row);
    EXPECT_EQ(r.id, biased ? 0 : 1);
    ASSERT_EQ(r.top.size(), 2u);
    EXPECT_EQ(r.top[0].id, 1);  // the model's own ranking, not the biased one
    EXPECT_EQ(r.top[1].id, 2);
    double z = 0;
    for (float x : logits) z += std::exp(static_cast<double>(x));
    EXPECT_NEAR(r.logprob, logits[static_cast<size_t>(r.id)] - std::log(z), 1e-5);
  }
}

}  // namespace
}  // namespace tarmac::sampling
