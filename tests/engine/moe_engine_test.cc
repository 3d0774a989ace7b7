// The mixture-of-experts goldens (tests/data/arch: qwen3moe, 8 experts, 2 per token; gpt-oss,
// the same with attention sinks, windows of 20 on even layers and YaRN) through the engine's
// paths: batched and chunked prefill, prefix-cache hits, preemption
// (recompute) and speculative decoding with a draft model. Each gives, request by request,
// the greedy tokens of the plain single-sequence path (each forward one sequence, prompt in
// one pass then one token at a time); the engine's integrity checks hold after every step, and
// every KV block is back in the pool at the end.
#include <unistd.h>

#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/arch_golden.h"
#include "engine/engine_core.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::engine {
namespace {


using Model = testing::LoadedGolden;

// The model under test (the test's parameter), made once per name.
std::string g_target = "qwen3moe";
Model& Target() {
  static std::map<std::string, Model> models;
  auto it = models.find(g_target);
  if (it == models.end()) {
    it = models.emplace(g_target, testing::LoadArchGoldenModel(g_target, "moe_engine")).first;
  }
  return it->second;
}
Model& Draft() {  // a dense model of the same vocabulary
  static Model m = testing::LoadArchGoldenModel("qwen3", "moe_engine");
  return m;
}

constexpr int kTokens = 40;

// The golden's prompts (32 tokens each), and two more that share the first's first 24 tokens.
std::vector<std::vector<int32_t>> Prompts() {
  std::vector<std::vector<int32_t>> out;
  for (const auto& c : Target().golden["cases"]) out.push_back(c["tokens"].get<std::vector<int32_t>>());
  for (int i = 0; i < 2; ++i) {
    std::vector<int32_t> p(out[0].begin(), out[0].begin() + 24);
    for (int32_t t = 0; t < 10; ++t) p.push_back(7 + 13 * t + i);
    out.push_back(p);
  }
  return out;
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;
  int32_t cached_prompt_tokens = 0;
  int32_t preemptions = 0;
};

// Runs every prompt at once (greedy, kTokens each) until idle, checking integrity per step.
Outcome RunAll(const EngineConfig& cfg, const std::vector<std::vector<int32_t>>& prompts,
            EngineCore* reuse = nullptr) {
  std::unique_ptr<EngineCore> own;
  EngineCore* core = reuse;
  if (core == nullptr) {
    own = std::move(EngineCore::Create(Target().model.get(), Target().tok.get(), cfg).value());
    core = own.get();
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  static int64_t next_id = 0;
  for (const auto& p : prompts) {
    EngineRequest r;
    r.prompt = p;
    r.sampling.temperature = 0.0f;
    r.max_tokens = kTokens;
    r.ignore_eos = true;
    EXPECT_TRUE(core->Validate(r).ok());
    streams.push_back(std::make_shared<RequestStream>(next_id));
    EXPECT_TRUE(core->Add(next_id++, r, streams.back()).ok());
  }
  Outcome o;
  o.tokens.resize(prompts.size());
  auto drain = [&] {
    for (size_t i = 0; i < streams.size(); ++i) {
      TokenEvent ev;
      while (streams[i]->TryNext(&ev)) {
        if (ev.token >= 0) o.tokens[i].push_back(ev.token);
        if (ev.last()) {
          o.cached_prompt_tokens += ev.metrics.cached_prompt_tokens;
          o.preemptions += ev.metrics.preemptions;
        }
      }
    }
  };
  for (int guard = 0; !core->idle() && guard < 20000; ++guard) {
    core->Step();
    EXPECT_TRUE(core->CheckIntegrity().ok()) << core->CheckIntegrity().message();
    drain();
  }
  EXPECT_TRUE(core->idle());
  drain();
  const EngineStats st = core->Stats();
  EXPECT_EQ(st.kv.free_blocks + st.kv.cached_only_blocks, cfg.kv.blocks);
  return o;
}

EngineConfig BaseConfig() {
  EngineConfig cfg;
  cfg.sched.block_size = 16;
  cfg.kv.blocks = 64;
  cfg.sched.max_batched_tokens = 20;  // prompts of 32+ prefill in chunks, beside decodes
  cfg.sched.max_running = 8;
  cfg.threads = 2;
  cfg.warmup = false;
  return cfg;
}

void ExpectPlain(const Outcome& o, const std::vector<std::vector<int32_t>>& prompts,
                 const char* what) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(o.tokens[i], testing::PlainGreedy(*Target().model, prompts[i], kTokens))
        << what << ": request " << i;
  }
}

class MoeEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { g_target = GetParam(); }
};

TEST_P(MoeEngineTest, BatchedAndChunkedPrefill) {
  const auto prompts = Prompts();
  ExpectPlain(RunAll(BaseConfig(), prompts), prompts, "batched, chunked");
}

TEST_P(MoeEngineTest, PrefixCacheHits) {
  EngineConfig cfg = BaseConfig();
  cfg.kv.prefix_cache = true;
  auto core = std::move(EngineCore::Create(Target().model.get(), Target().tok.get(), cfg).value());
  const auto prompts = Prompts();
  const Outcome first = RunAll(cfg, prompts, core.get());
  const Outcome again = RunAll(cfg, prompts, core.get());
  EXPECT_GT(again.cached_prompt_tokens, first.cached_prompt_tokens);
  EXPECT_GE(again.cached_prompt_tokens, 16 * static_cast<int32_t>(prompts.size()));
  ExpectPlain(first, prompts, "prefix cache, first run");
  ExpectPlain(again, prompts, "prefix cache, hits");
}

TEST_P(MoeEngineTest, PreemptionRecomputes) {
  EngineConfig cfg = BaseConfig();
  // 6 requests of up to 34 + 40 tokens (5 blocks each) in 12 blocks: some are preempted.
  cfg.kv.blocks = 12;
  const auto prompts = Prompts();
  const Outcome o = RunAll(cfg, prompts);
  EXPECT_GT(o.preemptions, 0);
  ExpectPlain(o, prompts, "preempted");
}

TEST_P(MoeEngineTest, SpeculativeDecodingWithADraftModel) {
  EngineConfig cfg = BaseConfig();
  cfg.spec.mode = SpecMode::kDraft;
  cfg.spec.draft_model = Draft().model.get();
  cfg.spec.policy_config.max_k = 3;
  const auto prompts = Prompts();
  ExpectPlain(RunAll(cfg, prompts), prompts, "speculative");
}

INSTANTIATE_TEST_SUITE_P(Families, MoeEngineTest, ::testing::Values("qwen3moe", "gpt-oss"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return i.param == "gpt-oss" ? std::string("gpt_oss") : i.param;
                         });

}  // namespace
}  // namespace tarmac::engine
