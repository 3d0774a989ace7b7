// Speculative sampling keeps the target's distribution: chi-square tests of the emitted tokens
// against the exact target distribution, with a draft that agrees and one that disagrees
// strongly; greedy verification equals the target's argmax.
#include "sampling/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tarmac::sampling {
namespace {

constexpr int32_t kV = 8;
// Chi-square critical values at significance 0.001 (a correct implementation fails about once
// in a thousand seeds; the seeds are fixed, so the test is deterministic).
constexpr double kChi2Crit7 = 24.32;   // 7 degrees of freedom
constexpr double kChi2Crit63 = 103.44; // 63 degrees of freedom

SamplingParams Params(float temp, uint64_t seed, float top_p = 1.0f) {
  SamplingParams p;
  p.temperature = temp;
  p.top_p = top_p;
  p.seed = seed;
  return p;
}

std::vector<float> Probs(const SamplingParams& params, std::vector<float> logits) {
  Sampler s(params, kV);
  s.ApplyProcessors(logits);
  std::vector<float> p(kV);
  s.Distribution(logits, p);
  return p;
}

double ChiSquare(const std::vector<int>& counts, const std::vector<double>& expected_p, int n) {
  double chi = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected_p[i] * n;
    if (e == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 under the target";
      continue;
    }
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

struct Case {
  const char* name;
  std::vector<float> target, draft;
  float top_p;
};

TEST(SpeculativeTest, OneTokenKeepsTargetDistribution) {
  const std::vector<Case> cases = {
      {"similar", {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f},
       {1.8f, 1.6f, 0.9f, 0.4f, 0.2f, -0.6f, -1.0f, -1.5f}, 1.0f},
      {"disagree", {3.0f, 2.0f, 1.0f, 0.0f, -1.0f, -2.0f, -3.0f, -4.0f},
       {-4.0f, -3.0f, -2.0f, -1.0f, 0.0f, 1.0f, 2.0f, 3.0f}, 1.0f},
      {"top_p", {2.0f, 1.9f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f},
       {0.0f, 0.0f, 0.0f, 3.0f, 0.0f, 0.0f, 0.0f, 2.0f}, 0.8f},
  };
  for (const Case& c : cases) {
    const SamplingParams tp = Params(0.8f, 11, c.top_p);
    const std::vector<float> p = Probs(tp, c.target);
    Sampler target(tp, kV), draft(Params(0.8f, 99, c.top_p), kV);
    const int n = 40000;
    std::vector<int> counts(kV, 0);
    int accepted = 0;
    for (int i = 0; i < n; ++i) {
      std::vector<float> dl = c.draft, tl = c.target;
      const DraftToken d = SampleDraft(draft, dl);
      const VerifyOutcome v = VerifyDraft(target, tl, d);
      accepted += v.accepted;
      ++counts[v.token.id];
    }
    const double chi = ChiSquare(counts, std::vector<double>(p.begin(), p.end()), n);
    EXPECT_LT(chi, kChi2Crit7) << c.name;
    std::printf("%-8s acceptance %.3f chi2 %.2f (crit %.2f)\n", c.name,
                static_cast<double>(accepted) / n, chi, kChi2Crit7);
  }
}

// Deterministic proposals (n-gram lookup): q is a point mass at the guess.
TEST(SpeculativeTest, PointMassDraftKeepsTargetDistribution) {
  const std::vector<float> logits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f};
  const SamplingParams tp = Params(0.8f, 21);
  const std::vector<float> p = Probs(tp, logits);
  for (int32_t guess : {0, 5}) {  // the target's favourite, and a token it rarely picks
    Sampler target(tp, kV);
    const int n = 40000;
    std::vector<int> counts(kV, 0);
    for (int i = 0; i < n; ++i) {
      auto l = logits;
      DraftToken d;
      d.id = guess;
      ++counts[VerifyDraft(target, l, d).token.id];
    }
    const double chi = ChiSquare(counts, std::vector<double>(p.begin(), p.end()), n);
    EXPECT_LT(chi, kChi2Crit7) << "guess " << guess;
  }
}

// A toy model whose next-token logits depend on the previous token; a full speculative step
// (k = 3 drafts, verification in order, bonus token when all pass) must emit its first two
// tokens with the target's joint distribution p(a) p(b | a).
std::vector<float> Toy(int prev, float sign) {
  std::vector<float> l(kV);
  for (int i = 0; i < kV; ++i) l[i] = sign * std::sin(1.3f * (prev + 1) * (i + 1)) * 2.0f;
  return l;
}

// The target's joint probability of the next two tokens after `start` (the toy model's
// logits at temperature 1), [kV * kV]: what two speculative steps must sample.
std::vector<double> TargetPairProbs(const SamplingParams& tp, int start) {
  std::vector<double> expect(kV * kV);
  const auto pa = Probs(tp, Toy(start, 1.0f));
  for (int a = 0; a < kV; ++a) {
    const auto pb = Probs(tp, Toy(a, 1.0f));
    for (int b = 0; b < kV; ++b) expect[a * kV + b] = static_cast<double>(pa[a]) * pb[b];
  }
  return expect;
}

TEST(SpeculativeTest, MultiTokenStepKeepsJointDistribution) {
  for (float draft_sign : {1.0f, -1.0f}) {  // agreeing draft, then a strongly disagreeing one
    const SamplingParams tp = Params(1.0f, 5);
    Sampler target(tp, kV), draft_base(Params(1.0f, 6), kV);
    const int n = 60000, k = 3, start = 2;
    std::vector<int> counts(kV * kV, 0);
    for (int trial = 0; trial < n; ++trial) {
      // Draft k tokens from q, each conditioned on the previous draft.
      std::vector<DraftToken> drafts;
      int prev = start;
      for (int i = 0; i < k; ++i) {
        auto l = Toy(prev, draft_sign);
        drafts.push_back(SampleDraft(draft_base, l));
        prev = drafts.back().id;
      }
      // Verify in order; the target's context follows the accepted tokens.
      std::vector<int> out;
      prev = start;
      for (int i = 0; i < k && out.size() < 2; ++i) {
        auto l = Toy(prev, 1.0f);
        const VerifyOutcome v = VerifyDraft(target, l, drafts[i]);
        out.push_back(v.token.id);
        if (!v.accepted) break;
        prev = v.token.id;
      }
      if (out.size() < 2) {  // continue from the target itself, as the next step would
        auto l = Toy(out.back(), 1.0f);
        out.push_back(target.Sample(l).id);
      }
      ++counts[out[0] * kV + out[1]];
    }
    const double chi = ChiSquare(counts, TargetPairProbs(tp, start), n);
    EXPECT_LT(chi, kChi2Crit63) << "draft sign " << draft_sign;
    std::printf("draft sign %+.0f: chi2 %.2f over 64 cells (crit %.2f)\n", draft_sign, chi,
                kChi2Crit63);
  }
}

TEST(SpeculativeTest, GreedyAcceptsExactlyTheArgmax) {
  Sampler target(Params(0.0f, 1), kV);
  std::vector<float> l = {0.1f, 3.0f, 0.2f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  DraftToken d;
  d.id = 1;
  auto lc = l;
  VerifyOutcome v = VerifyDraft(target, lc, d);
  EXPECT_TRUE(v.accepted);
  EXPECT_EQ(v.token.id, 1);
  d.id = 2;
  lc = l;
  v = VerifyDraft(target, lc, d);
  EXPECT_FALSE(v.accepted);
  EXPECT_EQ(v.token.id, 1);
  Sampler draft(Params(0.0f, 1), kV);
  lc = l;
  const DraftToken g = SampleDraft(draft, lc);
  EXPECT_EQ(g.id, 1);
  EXPECT_TRUE(g.q.empty());
}

// Tree nodes' children: 1-3 candidates drawn independently from q (SampleDraft on the same
// logits), or fixed ones (q empty), verified by VerifyCandidates: the emitted token has the
// target's distribution.
TEST(SpeculativeTest, CandidatesKeepTargetDistribution) {
  const std::vector<Case> cases = {
      {"similar", {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f},
       {1.8f, 1.6f, 0.9f, 0.4f, 0.2f, -0.6f, -1.0f, -1.5f}, 1.0f},
      {"disagree", {3.0f, 2.0f, 1.0f, 0.0f, -1.0f, -2.0f, -3.0f, -4.0f},
       {-4.0f, -3.0f, -2.0f, -1.0f, 0.0f, 1.0f, 2.0f, 3.0f}, 1.0f},
      {"top_p", {2.0f, 1.9f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f},
       {0.0f, 0.0f, 0.0f, 3.0f, 0.0f, 0.0f, 0.0f, 2.0f}, 0.8f},
  };
  for (const Case& c : cases) {
    for (int n_cand : {2, 3}) {
      const SamplingParams tp = Params(0.8f, 31 + n_cand, c.top_p);
      const std::vector<float> p = Probs(tp, c.target);
      Sampler target(tp, kV), draft(Params(0.8f, 77 + n_cand, c.top_p), kV);
      const int n = 40000;
      std::vector<int> counts(kV, 0);
      int accepted = 0;
      for (int i = 0; i < n; ++i) {
        std::vector<int32_t> cand;
        std::vector<float> q;
        for (int j = 0; j < n_cand; ++j) {
          std::vector<float> dl = c.draft;
          DraftToken d = SampleDraft(draft, dl);
          cand.push_back(d.id);
          q = std::move(d.q);
        }
        std::vector<float> tl = c.target;
        const CandidatesOutcome v = VerifyCandidates(target, tl, cand, q);
        accepted += v.accepted >= 0;
        if (v.accepted >= 0) {
          EXPECT_EQ(v.token.id, cand[v.accepted]);
        }
        ++counts[v.token.id];
      }
      const double chi = ChiSquare(counts, std::vector<double>(p.begin(), p.end()), n);
      EXPECT_LT(chi, kChi2Crit7) << c.name << " candidates " << n_cand;
      std::printf("%-8s %d candidates: acceptance %.3f chi2 %.2f (crit %.2f)\n", c.name, n_cand,
                  static_cast<double>(accepted) / n, chi, kChi2Crit7);
    }
  }
  // Fixed candidates (a greedy draft's top tokens): point masses.
  const std::vector<float> logits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -2.0f};
  const SamplingParams tp = Params(0.8f, 41);
  const std::vector<float> p = Probs(tp, logits);
  for (const std::vector<int32_t>& cand : {std::vector<int32_t>{0, 1, 2}, std::vector<int32_t>{6, 5}}) {
    Sampler target(tp, kV);
    const int n = 40000;
    std::vector<int> counts(kV, 0);
    for (int i = 0; i < n; ++i) {
      auto l = logits;
      ++counts[VerifyCandidates(target, l, cand, {}).token.id];
    }
    const double chi = ChiSquare(counts, std::vector<double>(p.begin(), p.end()), n);
    EXPECT_LT(chi, kChi2Crit7) << "fixed candidates from " << cand[0];
  }
}

// A whole tree step on the toy model: a spine of 2 drafts, with 2 more independent draws at
// each depth as siblings (leaves); verification walks the tree (SpecInfer), an accepted leaf
// gets the target's bonus token from its own logits. The first two emitted tokens must have
// the joint distribution p(a) p(b | a).
TEST(SpeculativeTest, TreeStepKeepsJointDistribution) {
  for (float draft_sign : {1.0f, -1.0f}) {
    const SamplingParams tp = Params(1.0f, 15);
    Sampler target(tp, kV), draft(Params(1.0f, 16), kV);
    const int n = 60000, depth = 2, width = 3, start = 2;
    std::vector<int> counts(kV * kV, 0);
    for (int trial = 0; trial < n; ++trial) {
      std::vector<DraftToken> spine;
      int prev = start;
      for (int d = 0; d < depth; ++d) {
        auto l = Toy(prev, draft_sign);
        DraftToken t = SampleDraft(draft, l);
        for (int j = 1; j < width; ++j) {
          auto l2 = Toy(prev, draft_sign);
          t.alts.push_back(SampleDraft(draft, l2).id);
        }
        prev = t.id;
        spine.push_back(std::move(t));
      }
      std::vector<int> out;
      prev = start;
      for (int d = 0; d < depth && out.size() < 2; ++d) {
        std::vector<int32_t> cand = {spine[d].id};
        cand.insert(cand.end(), spine[d].alts.begin(), spine[d].alts.end());
        auto l = Toy(prev, 1.0f);
        const CandidatesOutcome v = VerifyCandidates(target, l, cand, spine[d].q);
        out.push_back(v.token.id);
        prev = v.token.id;
        if (v.accepted < 0) break;
        // A sibling of the spine's token is a leaf: its row gives the bonus token.
        if (cand[v.accepted] != spine[d].id) {
          if (out.size() < 2) {
            auto lb = Toy(prev, 1.0f);
            out.push_back(target.Sample(lb).id);
          }
          break;
        }
      }
      if (out.size() < 2) {
        auto l = Toy(out.back(), 1.0f);
        out.push_back(target.Sample(l).id);
      }
      ++counts[out[0] * kV + out[1]];
    }
    const double chi = ChiSquare(counts, TargetPairProbs(tp, start), n);
    EXPECT_LT(chi, kChi2Crit63) << "draft sign " << draft_sign;
    std::printf("tree, draft sign %+.0f: chi2 %.2f over 64 cells (crit %.2f)\n", draft_sign, chi,
                kChi2Crit63);
  }
}

TEST(SpeculativeTest, GreedyCandidatesAcceptTheArgmax) {
  Sampler target(Params(0.0f, 1), kV);
  const std::vector<float> l = {0.1f, 3.0f, 0.2f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  auto lc = l;
  CandidatesOutcome v = VerifyCandidates(target, lc, std::vector<int32_t>{2, 1, 1}, {});
  EXPECT_EQ(v.accepted, 1);
  EXPECT_EQ(v.token.id, 1);
  lc = l;
  v = VerifyCandidates(target, lc, std::vector<int32_t>{2, 3}, {});
  EXPECT_EQ(v.accepted, -1);
  EXPECT_EQ(v.token.id, 1);
}

}  // namespace
}  // namespace tarmac::sampling
