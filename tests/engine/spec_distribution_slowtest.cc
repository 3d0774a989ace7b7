// Temperature > 0: speculation keeps the target's output distribution. For fixed contexts the
// engine samples the first output tokens thousands of times with speculation off and on
// (different seeds), and a two-sample chi-square test compares the histograms of the tokens
// that came out of verification (output positions 2 and 3; the first comes from prefill) at
// significance 0.001. Cases: the wp-1m draft for wp-11m, and a random-weight draft of the same
// vocabulary whose near-uniform guesses the target mostly rejects (strong disagreement).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <unistd.h>

#include "common/test_util.h"
#include "gguf/make_random.h"
#include "engine/engine_core.h"
#include "engine_test_util.h"

namespace tarmac::engine {
namespace {

using Loaded = testing::LoadedModel;
using testing::kWp1m;
constexpr auto Get = testing::CachedModel;
constexpr auto Load = testing::LoadModel;

// Samples n continuations of `prompt` (max_tokens 3) and returns them.
std::vector<std::vector<int32_t>> Sample(Loaded& target, model::LlamaModel* draft, SpecMode mode,
                                         const std::vector<int32_t>& prompt, int n,
                                         uint64_t seed0, int32_t tree_width = 0) {
  EngineConfig cfg;
  cfg.kv.blocks = 1024;
  cfg.sched.max_running = 64;
  cfg.sched.max_batched_tokens = 1024;
  cfg.spec.mode = mode;
  cfg.spec.policy_config.max_k = 3;
  cfg.spec.policy_config.max_width = tree_width;  // token trees: tree_width more candidates
  cfg.spec.policy_config.max_branch = 2;          // at each of the first two positions
  cfg.spec.draft_model = draft;
  cfg.kv.prefix_cache = true;
  auto core = std::move(EngineCore::Create(target.model.get(), target.tok.get(), cfg).value());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < n; ++i) {
    EngineRequest r;
    r.prompt = prompt;
    r.max_tokens = 3;
    r.ignore_eos = true;
    r.sampling.temperature = 0.8f;
    r.sampling.seed = seed0 + static_cast<uint64_t>(i);
    streams.push_back(std::make_shared<RequestStream>(i));
    EXPECT_TRUE(core->Add(i, r, streams.back()).ok());
  }
  while (!core->idle()) core->Step();
  EXPECT_TRUE(core->CheckIntegrity().ok());
  std::vector<std::vector<int32_t>> out;
  for (auto& s : streams) {
    std::vector<int32_t> t;
    TokenEvent ev;
    while (s->TryNext(&ev))
      if (ev.token >= 0) t.push_back(ev.token);
    out.push_back(t);
  }
  const SpecCounts spec = core->metrics().SpecTotal();
  const int64_t drafted = spec.draft_tokens, accepted = spec.accepted_tokens;
  if (mode != SpecMode::kOff) {
    EXPECT_GE(drafted, n) << "speculation did not run";
    std::printf("  %s: drafted %lld, accepted %lld (%.1f%%)\n", SpecModeName(mode),
                static_cast<long long>(drafted), static_cast<long long>(accepted),
                100.0 * accepted / std::max<int64_t>(drafted, 1));
  }
  return out;
}

// Two-sample chi-square over the tokens at output position `pos`; categories with fewer than
// 10 observations in total are pooled. Returns {statistic, critical value at 0.001}.
std::pair<double, double> ChiSquare(const std::vector<std::vector<int32_t>>& a,
                                    const std::vector<std::vector<int32_t>>& b, size_t pos) {
  std::map<int32_t, std::pair<double, double>> counts;
  for (const auto& s : a) counts[s.at(pos)].first += 1;
  for (const auto& s : b) counts[s.at(pos)].second += 1;
  std::vector<std::pair<double, double>> cells;
  std::pair<double, double> pooled{0, 0};
  for (const auto& [tok, c] : counts) {
    if (c.first + c.second >= 10) {
      cells.push_back(c);
    } else {
      pooled.first += c.first;
      pooled.second += c.second;
    }
  }
  if (pooled.first + pooled.second > 0) cells.push_back(pooled);
  const double n1 = static_cast<double>(a.size()), n2 = static_cast<double>(b.size());
  double chi = 0;
  for (const auto& [o1, o2] : cells) {
    const double tot = o1 + o2;
    const double e1 = tot * n1 / (n1 + n2), e2 = tot * n2 / (n1 + n2);
    chi += (o1 - e1) * (o1 - e1) / e1 + (o2 - e2) * (o2 - e2) / e2;
  }
  const double df = std::max<double>(1.0, static_cast<double>(cells.size()) - 1);
  const double z = 3.0902;  // upper 0.001 quantile of the standard normal
  const double h = 2.0 / (9.0 * df);
  const double crit = df * std::pow(1.0 - h + z * std::sqrt(h), 3.0);  // Wilson-Hilferty
  return {chi, crit};
}

TEST(SpecDistributionTest, SamplesMatchTheTargetWithAndWithoutSpeculation) {
  Loaded target = Load(testing::kWp11m);
  Loaded draft = Load(kWp1m);
  // A tiny random-weight model with the same vocabulary size: its distribution is close to
  // uniform, far from the target's.
  const std::string random_path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-spec_random_draft.gguf";
  ThreadPool pool(1);
  ASSERT_TRUE(gguf::MakeRandomModel(
                  gguf::ParseShape("dim=64,layers=1,heads=2,kv_heads=1,ffn=128,vocab=2048,ctx=512")
                      .value(),
                  DType::kF32, random_path, {}, &pool)
                  .ok());
  auto random_model = std::move(model::LlamaModel::Load(random_path).value());
  const int n = getenv("SPEC_N") ? atoi(getenv("SPEC_N")) : 3000;
  struct Case {
    const char* name;
    model::LlamaModel* draft;
    std::string prompt;
  };
  const std::vector<Case> cases = {
      {"wp-1m draft", draft.model.get(), "Prince Andrew looked at Pierre and"},
      {"random draft (disagreeing)", random_model.get(), "It was in July, 1805, and"},
  };
  for (const Case& c : cases) {
    std::printf("%s\n", c.name);
    const auto prompt = target.tok->Encode(c.prompt);
    const auto off = Sample(target, c.draft, SpecMode::kOff, prompt, n, 1);
    const auto on = Sample(target, c.draft, SpecMode::kDraft, prompt, n, 1000003);
    // Token trees (SpecInfer multi-candidate verification along the tree, accepted siblings'
    // K/V moved): the same distribution.
    const auto tree = Sample(target, c.draft, SpecMode::kDraft, prompt, n, 2000003, 3);
    for (size_t pos : {1u, 2u}) {
      const auto [chi, crit] = ChiSquare(off, on, pos);
      std::printf("  output position %zu: chi2 %.1f, critical %.1f\n", pos + 1, chi, crit);
      EXPECT_LT(chi, crit) << c.name << " position " << pos + 1;
      const auto [tchi, tcrit] = ChiSquare(off, tree, pos);
      std::printf("  trees, output position %zu: chi2 %.1f, critical %.1f\n", pos + 1, tchi, tcrit);
      EXPECT_LT(tchi, tcrit) << c.name << " (trees) position " << pos + 1;
      if (getenv("SPEC_DEBUG")) {
        std::map<int32_t, std::pair<int, int>> h;
        for (auto& x : off) h[x[pos]].first++;
        for (auto& x : on) h[x[pos]].second++;
        for (auto& [t, c2] : h)
          if (c2.first + c2.second > 60) std::printf("    tok %d off %d on %d\n", t, c2.first, c2.second);
      }
    }
  }
}

}  // namespace
}  // namespace tarmac::engine
