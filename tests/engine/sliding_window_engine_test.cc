// A model whose every layer has a sliding window (gemma3 with sliding_window_pattern 0, the
// tests/data/arch/gemma3-swa golden: window 24) through the engine: KV blocks that fall out
// of the window go back to the pool while requests run (counted), and the greedy tokens are
// those of the plain single-sequence path (which keeps every block) and of llama.cpp up to
// its first near-tie.
#include <unistd.h>

#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/arch_golden.h"
#include "engine/engine_core.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "model/sequence_runner.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::engine {
namespace {


testing::LoadedGolden& LoadGolden() {
  static testing::LoadedGolden g = testing::LoadArchGoldenModel("gemma3-swa", "sliding_window_engine");
  return g;
}

std::vector<int32_t> Drain(RequestStream& s) {
  std::vector<int32_t> tokens;
  TokenEvent ev;
  while (s.TryNext(&ev)) {
    if (ev.token >= 0) tokens.push_back(ev.token);
  }
  return tokens;
}

// Our gap between our top logit and `token` after prompt + forced (teacher forcing).
double OurGap(model::LlamaModel& m, std::vector<int32_t> tokens, int32_t token) {
  ThreadPool pool(1);
  model::SequenceRunner runner(&m, 256, &pool);
  std::vector<float> logits;
  EXPECT_TRUE(runner.Append(tokens, false, &logits).ok());
  return *std::max_element(logits.begin(), logits.end()) - logits[token];
}

void RunAndCheck(bool prefix_cache) {
  testing::LoadedGolden& g = LoadGolden();
  model::LlamaModel& m = *g.model;
  ASSERT_EQ(m.config().KvRetentionWindow(), 24);
  EngineConfig cfg;
  cfg.sched.block_size = 16;
  cfg.kv.blocks = 64;
  cfg.sched.max_batched_tokens = 20;  // prompts of 32 prefill in two chunks, across the window
  cfg.sched.max_running = 4;
  cfg.kv.prefix_cache = prefix_cache;
  cfg.threads = 2;
  cfg.warmup = false;
  auto core = std::move(EngineCore::Create(&m, g.tok.get(), cfg).value());
  const auto& cases = g.golden["cases"];
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < cases.size(); ++i) {
    EngineRequest r;
    r.prompt = cases[i]["tokens"].get<std::vector<int32_t>>();
    r.sampling.temperature = 0.0f;
    r.max_tokens = static_cast<int32_t>(cases[i]["greedy"].size());
    r.ignore_eos = true;
    ASSERT_TRUE(core->Validate(r).ok());
    streams.push_back(std::make_shared<RequestStream>(static_cast<int64_t>(i)));
    ASSERT_TRUE(core->Add(static_cast<int64_t>(i), r, streams.back()).ok());
  }
  // Each request holds at most the window's blocks plus the ones its next tokens write:
  // ceil((24 - 1 + 20) / 16) + 1 = 4; without the release they would hold 6 at the end.
  int32_t max_held = 0;
  std::vector<std::vector<int32_t>> got(cases.size());
  for (int guard = 0; !core->idle() && guard < 10000; ++guard) {
    core->Step();
    ASSERT_TRUE(core->CheckIntegrity().ok()) << core->CheckIntegrity().message();
    const EngineStats st = core->Stats();
    max_held = std::max(max_held, st.kv.request_blocks);
    ASSERT_LE(st.kv.request_blocks, 4 * st.num_running) << "blocks outside the window kept";
    for (size_t i = 0; i < cases.size(); ++i) {
      for (int32_t t : Drain(*streams[i])) got[i].push_back(t);
    }
  }
  ASSERT_TRUE(core->idle());
  const EngineStats st = core->Stats();
  EXPECT_EQ(st.kv.free_blocks + st.kv.cached_only_blocks, 64);
  std::printf("prefix cache %s: at most %d blocks held by 4 requests of 96 tokens (6 each "
              "without the release)\n", prefix_cache ? "on" : "off", max_held);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto prompt = cases[i]["tokens"].get<std::vector<int32_t>>();
    const auto llama = cases[i]["greedy"].get<std::vector<int32_t>>();
    const auto margin = cases[i]["greedy_margin"].get<std::vector<double>>();
    EXPECT_EQ(got[i], testing::PlainGreedy(m, prompt, static_cast<int>(llama.size()))) << "case " << i;
    size_t s = 0;
    while (s < llama.size() && got[i][s] == llama[s]) ++s;
    if (s < llama.size()) {  // the first difference must be a near-tie
      std::vector<int32_t> upto = prompt;
      upto.insert(upto.end(), llama.begin(), llama.begin() + static_cast<std::ptrdiff_t>(s));
      const double gap = OurGap(m, upto, llama[s]);
      EXPECT_TRUE(margin[s] <= 0.02 || gap <= 0.02)
          << "case " << i << " step " << s << ": llama.cpp margin " << margin[s] << ", our gap "
          << gap;
    }
    std::printf("case %zu: %zu of %zu tokens as llama.cpp's before the first near-tie\n", i, s,
                llama.size());
  }
}

TEST(SlidingWindowEngineTest, ReleasesBlocksAndKeepsTokens) { RunAndCheck(/*prefix_cache=*/false); }

TEST(SlidingWindowEngineTest, WithPrefixCache) { RunAndCheck(/*prefix_cache=*/true); }

}  // namespace
}  // namespace tarmac::engine
