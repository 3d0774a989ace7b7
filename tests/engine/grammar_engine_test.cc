// Constrained decoding through the engine: outputs match their grammar in batches that mix
// constrained and free requests (the free ones unchanged by their neighbours), a complete
// grammar finishes the request with kStop, greedy constrained output is identical with
// speculation (draft model and n-gram) and without, grammars compiled for another vocabulary
// are refused; prompt logprobs (echo) are the same computed in one pass or in chunks, and
// with a warm prefix cache.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "engine/engine_core.h"
#include "engine_test_util.h"
#include "grammar/matcher.h"
#include "grammar/structured_output.h"
#include "kernels/dispatch.h"

namespace tarmac::engine {
namespace {

using Loaded = testing::LoadedModel;
constexpr auto Get = testing::CachedModel;

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::vector<sampling::SampleResult> prompt_logprobs;
  std::vector<std::vector<sampling::TokenLogprob>> top;  // per generated token
};

EngineConfig Cfg(SpecMode mode = SpecMode::kOff, int32_t max_batched = 64) {
  EngineConfig cfg;
  cfg.kv.blocks = 256;
  cfg.sched.max_batched_tokens = max_batched;
  cfg.spec.mode = mode;
  cfg.spec.policy_config.max_k = 4;
  cfg.spec.draft_model = Get(testing::kWp1m).model.get();
  return cfg;
}

std::unique_ptr<EngineCore> Core(const EngineConfig& cfg) {
  Loaded& m = Get(testing::kWp11m);
  return std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
}

std::shared_ptr<const grammar::CompiledGrammar> Compile(EngineCore& core, const grammar::StructuredOutputSpec& spec) {
  auto g = grammar::BuildGrammar(spec);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  auto c = core.grammars()->Compile(*g);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

grammar::StructuredOutputSpec Schema(const std::string& text) {
  grammar::StructuredOutputSpec s;
  s.kind = grammar::StructuredOutputKind::kJsonSchema;
  s.text = text;
  return s;
}

grammar::StructuredOutputSpec Regex(const std::string& re) {
  grammar::StructuredOutputSpec s;
  s.kind = grammar::StructuredOutputKind::kRegex;
  s.text = re;
  return s;
}

grammar::StructuredOutputSpec Choice(std::vector<std::string> choices) {
  grammar::StructuredOutputSpec s;
  s.kind = grammar::StructuredOutputKind::kChoice;
  s.choices = std::move(choices);
  return s;
}

EngineRequest Req(const std::string& prompt, int32_t max_tokens, float temp = 0.0f, uint64_t seed = 7) {
  EngineRequest r;
  r.prompt = Get(testing::kWp11m).tok->Encode(prompt);
  r.sampling.temperature = temp;
  r.sampling.seed = seed;
  r.max_tokens = max_tokens;
  return r;
}

std::vector<Outcome> RunAll(EngineCore& core, const std::vector<EngineRequest>& reqs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < reqs.size(); ++i) {
    streams.push_back(std::make_shared<RequestStream>(i));
    Status st = core.Add(static_cast<int64_t>(i), reqs[i], streams.back());
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  for (int guard = 0; !core.idle() && guard < 100000; ++guard) {
    core.Step();
    EXPECT_TRUE(core.CheckIntegrity().ok()) << core.CheckIntegrity().message();
  }
  std::vector<Outcome> out;
  for (auto& s : streams) {
    Outcome r;
    TokenEvent ev;
    while (s->TryNext(&ev)) {
      if (ev.token >= 0) r.tokens.push_back(ev.token);
      if (ev.token >= 0) r.top.push_back(ev.top);
      r.text += ev.text;
      for (auto& p : ev.prompt_logprobs) r.prompt_logprobs.push_back(p);
      if (ev.last()) r.finish = ev.finish;
    }
    out.push_back(std::move(r));
  }
  return out;
}

// Every token the grammar accepts in order; an end-of-generation token only last.
bool Matches(const std::shared_ptr<const grammar::CompiledGrammar>& g, const std::vector<int32_t>& tokens) {
  grammar::GrammarMatcher m(g);
  for (int32_t t : tokens)
    if (!m.AcceptToken(t)) return false;
  return true;
}

const char* kPersonSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "side": {"enum": ["french", "russian"]}},
  "required": ["name", "age", "side"]})";

TEST(GrammarEngineTest, MixedBatchConstrainedMatchFreeUnchanged) {
  auto core = Core(Cfg());
  auto person = Compile(*core, Schema(kPersonSchema));
  auto date = Compile(*core, Regex("[0-9]{4}-[0-9]{2}-[0-9]{2}"));
  auto side = Compile(*core, Choice({"French", "Russian", "Austrian"}));
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    EngineRequest r = Req(i % 2 ? "Prince Andrew said" : "Natasha", 400, i < 4 ? 0.0f : 0.9f, 100 + i);
    if (i % 4 == 1) r.grammar = person;
    if (i % 4 == 2) r.grammar = date;
    if (i % 4 == 3) r.grammar = side;
    reqs.push_back(std::move(r));
  }
  const std::vector<Outcome> mixed = RunAll(*core, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (!reqs[i].grammar) continue;
    EXPECT_TRUE(Matches(reqs[i].grammar, mixed[i].tokens)) << i << ": " << mixed[i].text;
    if (mixed[i].finish == FinishReason::kStop) {
      grammar::GrammarMatcher m(reqs[i].grammar);
      EXPECT_TRUE(m.AcceptBytes(mixed[i].text));
      EXPECT_TRUE(m.CanEnd()) << i << ": " << mixed[i].text;
    }
  }
  ASSERT_EQ(mixed[1].finish, FinishReason::kStop) << mixed[1].text;
  auto parsed = nlohmann::json::parse(mixed[1].text);
  EXPECT_TRUE(parsed["age"].is_number_integer());
  EXPECT_TRUE(parsed["side"] == "french" || parsed["side"] == "russian");
  EXPECT_EQ(mixed[2].text.size(), 10u);
  EXPECT_EQ(mixed[2].finish, FinishReason::kStop);  // the regex is complete after 10 characters
  EXPECT_TRUE(mixed[3].text == "French" || mixed[3].text == "Russian" || mixed[3].text == "Austrian") << mixed[3].text;
  EXPECT_EQ(mixed[3].finish, FinishReason::kStop);
  // Free requests give what they give alone, where the products do not depend on the batch
  // (EngineCoreTest.SeededSamplingDoesNotDependOnTheBatch says where they do).
  if (kernels::WantsAmxCopy(DType::kF16)) return;
  for (size_t i : {0u, 4u}) {
    auto alone_core = Core(Cfg());
    const std::vector<Outcome> alone = RunAll(*alone_core, {reqs[i]});
    EXPECT_EQ(alone[0].tokens, mixed[i].tokens) << i;
  }
}

TEST(GrammarEngineTest, IgnoreEosStillEndsWhenTheGrammarIsComplete) {
  auto core = Core(Cfg());
  EngineRequest r = Req("Pierre", 50);
  r.ignore_eos = true;
  r.grammar = Compile(*core, Choice({"yes", "no"}));
  const Outcome run = RunAll(*core, {r})[0];
  EXPECT_TRUE(run.text == "yes" || run.text == "no") << run.text;
  EXPECT_EQ(run.finish, FinishReason::kStop);
}

TEST(GrammarEngineTest, MaxTokensCutsWithLength) {
  auto core = Core(Cfg());
  EngineRequest r = Req("Pierre", 3);
  r.grammar = Compile(*core, Schema(kPersonSchema));
  const Outcome run = RunAll(*core, {r})[0];
  EXPECT_EQ(run.tokens.size(), 3u);
  EXPECT_EQ(run.finish, FinishReason::kLength);
  EXPECT_TRUE(Matches(r.grammar, run.tokens));
}

TEST(GrammarEngineTest, GreedyConstrainedOutputIdenticalWithSpeculation) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Req(i % 2 ? "The prince answered nothing" : "Well, Prince", 48));
  auto run = [&](SpecMode mode) {
    auto core = Core(Cfg(mode));
    std::vector<EngineRequest> rs = reqs;
    rs[0].grammar = Compile(*core, Schema(kPersonSchema));
    rs[1].grammar = Compile(*core, Regex("(the|a|an) [a-z]{1,8}( [a-z]{1,8}){0,6}\\."));
    rs[3].grammar = Compile(*core, grammar::StructuredOutputSpec{});  // any JSON object
    rs[4].grammar = rs[1].grammar;
    auto out = RunAll(*core, rs);
    for (size_t i = 0; i < rs.size(); ++i)
      if (rs[i].grammar) {
        EXPECT_TRUE(Matches(rs[i].grammar, out[i].tokens)) << SpecModeName(mode) << " " << i;
      }
    return std::make_pair(out, core->metrics().SpecTotal());
  };
  const auto [off, off_spec] = run(SpecMode::kOff);
  for (SpecMode mode : {SpecMode::kDraft, SpecMode::kNgram}) {
    const auto [on, spec] = run(mode);
    EXPECT_GT(spec.draft_tokens, 0) << SpecModeName(mode);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(on[i].tokens, off[i].tokens) << SpecModeName(mode) << " request " << i;
      EXPECT_EQ(on[i].finish, off[i].finish) << SpecModeName(mode) << " request " << i;
    }
  }
}

TEST(GrammarEngineTest, SampledConstrainedOutputMatchesWithSpeculation) {
  auto core = Core(Cfg(SpecMode::kDraft));
  auto person = Compile(*core, Schema(kPersonSchema));
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    reqs.push_back(Req("Natasha", 64, 0.8f, 50 + i));
    reqs.back().grammar = person;
  }
  for (const Outcome& r : RunAll(*core, reqs)) {
    EXPECT_TRUE(Matches(person, r.tokens)) << r.text;
    if (r.finish == FinishReason::kStop) {
      EXPECT_NO_THROW(nlohmann::json::parse(r.text)) << r.text;
    }
  }
}

TEST(GrammarEngineTest, RefusesAGrammarOfAnotherVocabulary) {
  auto core = Core(Cfg());
  auto g = grammar::BuildGrammar(Choice({"a", "b"}));
  ASSERT_TRUE(g.ok());
  auto foreign = grammar::CompiledGrammar::Compile(*g, grammar::TokenTable::Build(*Get(testing::kWp11m).tok));
  ASSERT_TRUE(foreign.ok());
  EngineRequest r = Req("Pierre", 4);
  r.grammar = *foreign;
  auto v = core->Validate(r);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().field(), "grammar");
}

TEST(GrammarEngineTest, GrammarCacheReusesCompiledGrammars) {
  auto core = Core(Cfg());
  auto a = Compile(*core, Schema(kPersonSchema));
  auto b = Compile(*core, Schema(kPersonSchema));
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(core->grammars()->stats().hits, 1);
}

// Prompt logprobs: one entry per prompt token after the first, each holding that token and
// the requested alternatives; identical when the prompt is prefilled in small chunks, and
// when the prefix cache already holds the prompt (it is recomputed, not reused).
TEST(GrammarEngineTest, PromptLogprobsSameInChunksAndWithAWarmCache) {
  const std::string prompt = "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. But I warn you";
  EngineRequest r = Req(prompt, 2);
  r.prompt_logprobs = 3;
  auto whole = Core(Cfg(SpecMode::kOff, 512));
  const Outcome a = RunAll(*whole, {r})[0];
  ASSERT_EQ(a.prompt_logprobs.size(), r.prompt.size() - 1);
  for (size_t i = 0; i < a.prompt_logprobs.size(); ++i) {
    EXPECT_EQ(a.prompt_logprobs[i].id, r.prompt[i + 1]);
    EXPECT_EQ(a.prompt_logprobs[i].top.size(), 3u);
    EXPECT_LE(a.prompt_logprobs[i].logprob, a.prompt_logprobs[i].top[0].logprob + 1e-6f);
  }
  auto chunked = Core(Cfg(SpecMode::kOff, 7));
  const Outcome b = RunAll(*chunked, {r})[0];
  const Outcome c = RunAll(*chunked, {r})[0];  // the prompt is cached now
  for (const Outcome* x : {&b, &c}) {
    ASSERT_EQ(x->prompt_logprobs.size(), a.prompt_logprobs.size());
    for (size_t i = 0; i < a.prompt_logprobs.size(); ++i) {
      EXPECT_NEAR(x->prompt_logprobs[i].logprob, a.prompt_logprobs[i].logprob, 1e-3) << i;
      EXPECT_EQ(x->prompt_logprobs[i].top[0].id, a.prompt_logprobs[i].top[0].id) << i;
    }
    EXPECT_EQ(x->tokens, a.tokens);
  }
}

// Prompt logprob i is the distribution after prompt tokens 0..i: the same as the first
// generated token's top logprobs when the prompt is cut after token i (not a position off).
TEST(GrammarEngineTest, PromptLogprobsAreTheNextTokenDistributionAtEachPosition) {
  EngineRequest r = Req("Prince Andrew looked at Pierre with a smile", 1);
  r.prompt_logprobs = 4;
  r.sampling.top_logprobs = 4;
  auto core = Core(Cfg());
  const Outcome whole = RunAll(*core, {r})[0];
  ASSERT_EQ(whole.prompt_logprobs.size(), r.prompt.size() - 1);
  ASSERT_GE(r.prompt.size(), 6u);
  for (size_t i = 0; i + 1 < r.prompt.size(); ++i) {
    EngineRequest cut = r;
    cut.prompt.assign(r.prompt.begin(), r.prompt.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    cut.prompt_logprobs = 0;
    auto fresh = Core(Cfg());  // no cached prefix: the same computation path
    const Outcome o = RunAll(*fresh, {cut})[0];
    ASSERT_EQ(o.top.size(), 1u);
    const auto& want = o.top[0];
    const sampling::SampleResult& got = whole.prompt_logprobs[i];
    ASSERT_EQ(got.top.size(), want.size()) << i;
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(got.top[k].id, want[k].id) << "position " << i << " alternative " << k;
      EXPECT_NEAR(got.top[k].logprob, want[k].logprob, 2e-3) << "position " << i << " alternative " << k;
    }
    // The prompt token's own logprob, where it is among the alternatives.
    for (const auto& t : want) {
      if (t.id == r.prompt[i + 1]) {
        EXPECT_NEAR(got.logprob, t.logprob, 2e-3) << i;
      }
    }
  }
}

}  // namespace
}  // namespace tarmac::engine
