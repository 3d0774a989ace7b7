// Speculative decoding through the engine: greedy output identical with speculation on and off
// (draft model and n-gram proposers, batches mixing speculating and plain requests); target
// and draft KV integrity after random accept/reject sequences at temperature > 0.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "common/test_util.h"
#include "engine/engine_core.h"
#include "engine_test_util.h"
#include "speculative/draft_model_proposer.h"

namespace tarmac::engine {
namespace {

using Loaded = testing::LoadedModel;
using testing::kWp1m;
constexpr auto Get = testing::CachedModel;
constexpr auto Load = testing::LoadModel;

EngineRequest Req(std::vector<int32_t> prompt, int32_t max_tokens, float temp = 0.0f) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = temp;
  r.sampling.seed = 1234;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

std::vector<std::vector<int32_t>> Prompts(const tok::Tokenizer& t) {
  const std::vector<std::string> texts = {
      "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes.",
      "It was in July, 1805,",
      "Pierre",
      "The prince answered nothing, but she looked at him significantly. The prince answered "
      "nothing, but she looked at him",
      "Anna Pavlovna had had a cough for some days.",
  };
  std::vector<std::vector<int32_t>> out;
  for (const auto& s : texts) out.push_back(t.Encode(s));
  return out;
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;
  EngineStats stats;
  SpecCounts spec;
};

Outcome RunAll(const std::vector<EngineRequest>& reqs, EngineConfig cfg) {
  Loaded& m = Get(testing::kWp11m);
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < reqs.size(); ++i) {
    streams.push_back(std::make_shared<RequestStream>(i));
    EXPECT_TRUE(core->Add(static_cast<int64_t>(i), reqs[i], streams.back()).ok());
  }
  for (int guard = 0; !core->idle() && guard < 100000; ++guard) {
    core->Step();
    EXPECT_TRUE(core->CheckIntegrity().ok()) << core->CheckIntegrity().message();
  }
  Outcome run;
  for (auto& s : streams) {
    std::vector<int32_t> toks;
    TokenEvent ev;
    while (s->TryNext(&ev)) {
      if (ev.token >= 0) toks.push_back(ev.token);
      EXPECT_NE(ev.finish, FinishReason::kError);
    }
    run.tokens.push_back(toks);
  }
  run.stats = core->Stats();
  run.spec = core->metrics().SpecTotal();
  return run;
}

// width, branch: token trees (0: chains).
EngineConfig Cfg(SpecMode mode, int32_t k = 4, int32_t width = 0, int32_t branch = 0) {
  EngineConfig cfg;
  cfg.kv.blocks = 256;
  cfg.sched.max_batched_tokens = 64;
  cfg.spec.mode = mode;
  cfg.spec.policy_config.max_k = k;
  cfg.spec.policy_config.max_width = width;
  cfg.spec.policy_config.max_branch = branch;
  cfg.spec.draft_model = Get(kWp1m).model.get();
  return cfg;
}

TEST(SpecEngineTest, GreedyOutputIdenticalWithSpeculation) {
  Loaded& m = Get(testing::kWp11m);
  std::vector<EngineRequest> reqs;
  const auto prompts = Prompts(*m.tok);
  for (size_t i = 0; i < prompts.size(); ++i) {
    reqs.push_back(Req(prompts[i], 40));
    reqs.back().speculative = i % 3 != 1;  // a mixed batch: some requests never speculate
  }
  const Outcome off = RunAll(reqs, Cfg(SpecMode::kOff));
  for (SpecMode mode : {SpecMode::kDraft, SpecMode::kNgram, SpecMode::kAuto}) {
    for (int32_t k : {1, 4}) {
      const Outcome on = RunAll(reqs, Cfg(mode, k));
      for (size_t i = 0; i < reqs.size(); ++i)
        EXPECT_EQ(on.tokens[i], off.tokens[i]) << SpecModeName(mode) << " k " << k << " request " << i;
      const int64_t drafted = on.spec.draft_tokens, accepted = on.spec.accepted_tokens;
      if (mode != SpecMode::kAuto) {
        EXPECT_GT(drafted, 0) << SpecModeName(mode);
      }
      std::printf("%s k=%d: drafted %lld accepted %lld (%.0f%%)\n", SpecModeName(mode), k,
                  static_cast<long long>(drafted), static_cast<long long>(accepted),
                  drafted ? 100.0 * accepted / drafted : 0.0);
    }
  }
}

// Token trees: greedy output identical to speculation off for fixed tree shapes (siblings at
// the first 1-3 positions, which are accepted where the spine is not: their K/V moves onto the
// path) and for the policy choosing chains or trees; the budget of 64 tokens a step cuts some
// trees. Both drafts: wp-1m and the distilled one (which agrees with wp-11m more often).
TEST(SpecEngineTest, GreedyOutputIdenticalWithTrees) {
  Loaded& m = Get(testing::kWp11m);
  std::vector<EngineRequest> reqs;
  const auto prompts = Prompts(*m.tok);
  for (size_t i = 0; i < prompts.size(); ++i) {
    reqs.push_back(Req(prompts[i], 40));
    reqs.back().speculative = i % 3 != 1;
  }
  const Outcome off = RunAll(reqs, Cfg(SpecMode::kOff));
  struct Run { SpecMode mode; int32_t k, width, branch; };
  for (const std::string& draft : {testing::kWp1m, testing::kWp1mDistill}) {
    for (Run r : {Run{SpecMode::kDraft, 1, 1, 1}, Run{SpecMode::kDraft, 3, 2, 2}, Run{SpecMode::kDraft, 4, 3, 3},
                  Run{SpecMode::kDraft, 2, 4, 1}, Run{SpecMode::kAuto, 4, 3, 3}}) {
      EngineConfig cfg = Cfg(r.mode, r.k, r.width, r.branch);
      cfg.spec.draft_model = Get(draft).model.get();
      const Outcome on = RunAll(reqs, cfg);
      for (size_t i = 0; i < reqs.size(); ++i)
        EXPECT_EQ(on.tokens[i], off.tokens[i]) << draft << " " << SpecModeName(r.mode) << " k " << r.k << " tree "
                                               << r.width << "x" << r.branch << " request " << i;
      if (r.mode == SpecMode::kDraft) {
        // Tree tokens are drafted: more than k a verification.
        EXPECT_GT(on.spec.draft_tokens, static_cast<int64_t>(r.k) * on.spec.drafts);
      }
      std::printf("%s %s k=%d tree %dx%d: %lld verifications, %lld tree tokens, %lld accepted (%.2f a "
                  "verification), %lld steps\n",
                  draft.substr(draft.rfind('/') + 1).c_str(), SpecModeName(r.mode), r.k, r.width, r.branch,
                  static_cast<long long>(on.spec.drafts), static_cast<long long>(on.spec.draft_tokens),
                  static_cast<long long>(on.spec.accepted_tokens),
                  on.spec.drafts ? static_cast<double>(on.spec.accepted_tokens) / on.spec.drafts : 0.0,
                  static_cast<long long>(on.stats.steps));
    }
  }
}

// Trees at temperature > 0 with a small pool (preemption, budget cuts): integrity of the
// target's and the draft's KV after every step (RunAll), rejected branches' blocks back at
// once, every request complete.
TEST(SpecEngineTest, RandomTreesKeepIntegrity) {
  Loaded& m = Get(testing::kWp11m);
  const auto prompts = Prompts(*m.tok);
  std::mt19937 rng(5);
  for (int32_t width : {1, 3}) {
    std::vector<EngineRequest> reqs;
    for (int i = 0; i < 12; ++i) {
      EngineRequest r = Req(prompts[i % prompts.size()], 8 + static_cast<int32_t>(rng() % 40), i % 4 == 0 ? 0.0f : 0.8f);
      r.sampling.seed = static_cast<uint64_t>(i);
      reqs.push_back(r);
    }
    EngineConfig cfg = Cfg(SpecMode::kDraft, 4, width, 2);
    cfg.kv.blocks = 20;
    cfg.sched.max_batched_tokens = 24;
    const Outcome run = RunAll(reqs, cfg);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(static_cast<int32_t>(run.tokens[i].size()), reqs[i].max_tokens) << i;
    EXPECT_EQ(run.stats.kv.request_blocks, 0);
    EXPECT_GT(run.spec.draft_tokens, 0);
    EXPECT_GT(run.spec.accepted_tokens, 0);
  }
}

// Random acceptance at temperature > 0 with a small pool (preemption, draft KV release and
// rollback), integrity of target and draft KV after every step; everything returns.
TEST(SpecEngineTest, RandomAcceptRejectKeepsIntegrity) {
  Loaded& m = Get(testing::kWp11m);
  const auto prompts = Prompts(*m.tok);
  std::vector<EngineRequest> reqs;
  std::mt19937 rng(3);
  for (int i = 0; i < 12; ++i) {
    EngineRequest r = Req(prompts[i % prompts.size()], 8 + static_cast<int32_t>(rng() % 40), 0.8f);
    r.sampling.seed = static_cast<uint64_t>(i);
    reqs.push_back(r);
  }
  EngineConfig cfg = Cfg(SpecMode::kDraft, 5);
  cfg.kv.blocks = 20;
  const Outcome run = RunAll(reqs, cfg);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(static_cast<int32_t>(run.tokens[i].size()), reqs[i].max_tokens) << i;
  EXPECT_EQ(run.stats.kv.request_blocks, 0);
  const int64_t drafted = run.spec.draft_tokens, accepted = run.spec.accepted_tokens;
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);  // some rejections happened
}

// The policy prices a draft round from the proposer's steady rounds: a round that first
// catches up a new request's prompt is left out (a 64-token catch-up priced wp-1m's rounds at
// ~1 ms instead of ~0.05 ms and kept a paying bucket off), while rounds that feed the last
// accepted guess and the bonus token (at most 2 tokens a request) count.
TEST(SpecEngineTest, DraftCatchUpIsNotASteadyRound) {
  Loaded& target = Get(testing::kWp11m);
  Loaded& draft = Get(kWp1m);
  ThreadPool pool(1);
  auto p = std::move(speculative::DraftModelProposer::Create(draft.model.get(),
                                                      target.model->config().n_vocab, 512, 2,
                                                      &pool)
                         .value());
  std::vector<int32_t> tokens = Prompts(*target.tok)[0];
  ASSERT_GT(tokens.size(), 8u);
  sampling::SamplingParams params;
  params.temperature = 0.0f;
  const sampling::Sampler sampler(params, target.model->config().n_vocab);
  std::vector<std::vector<sampling::DraftToken>> drafts;
  int32_t rounds = -1;
  double seconds = -1;
  const speculative::ProposeRequest req{7, &tokens, &sampler, 3};
  p->Propose(std::span(&req, 1), &drafts);
  ASSERT_EQ(drafts[0].size(), 3u);
  ASSERT_TRUE(p->SteadyRounds(&rounds, &seconds));
  EXPECT_EQ(rounds, 2);  // the prompt catch-up round is not one
  EXPECT_GT(seconds, 0.0);
  // Every guess accepted, plus a bonus token: the next catch-up feeds 2 tokens.
  const int32_t len = static_cast<int32_t>(tokens.size());
  for (const auto& d : drafts[0]) tokens.push_back(d.id);
  tokens.push_back(5);
  p->Rollback(7, len + 3);
  p->Propose(std::span(&req, 1), &drafts);
  ASSERT_TRUE(p->SteadyRounds(&rounds, &seconds));
  EXPECT_EQ(rounds, 3);
  EXPECT_TRUE(p->CheckIntegrity().ok());
}

}  // namespace
}  // namespace tarmac::engine
