// Every model family served through the model pool (PoolModel + EngineTarget, the path
// `tarmac serve` takes): the random-weight models of tests/data/arch/*.golden.json, written
// again by make-random, answer two prompts at once with 64 greedy tokens each that are the
// plain single-sequence path's argmax at every step (or within a near-tie of it, at most 2
// steps: the batches the engine forms depend on timing) and llama.cpp's (the golden's) up to
// its first near-tie, and every KV block goes back to the pool afterwards.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "common/arch_golden.h"
#include "gguf/make_random.h"
#include "gguf/model_presets.h"
#include "metrics/registry.h"
#include "model/llama_model.h"
#include "model/sequence_runner.h"
#include "router/model_pool.h"
#include "router/target.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::router {
namespace {

const std::string kRepo = TARMAC_SOURCE_DIR;
constexpr double kNearTie = 0.02;  // nats, as tests/model/arch_golden_test.cc

int32_t ArgMax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The engine's greedy tokens teacher-forced through the single-sequence path: at every step
// the token is the plain path's argmax or within kNearTie nats of it (the engine batches the
// choices as its steps happen to fall, so a near-tie may break the other way). Returns the
// number of steps where it is the argmax.
int CheckAgainstPlainPath(model::LlamaModel& m, int32_t context,
                          const std::vector<int32_t>& prompt, const std::vector<int32_t>& got,
                          const std::string& what) {
  ThreadPool pool(2);
  model::SequenceRunner runner(&m, context, &pool);
  std::vector<float> logits;
  EXPECT_TRUE(runner.Append(prompt, false, &logits).ok());
  int argmax = 0;
  for (size_t s = 0; s < got.size(); ++s) {
    const int32_t best = ArgMax(logits);
    const double gap = double{logits[best]} - double{logits[got[s]]};
    EXPECT_LE(gap, kNearTie) << what << " step " << s << ": engine " << got[s] << ", plain "
                             << best;
    argmax += best == got[s] ? 1 : 0;
    const int32_t one[1] = {got[s]};
    EXPECT_TRUE(runner.Append(one, false, &logits).ok());
  }
  return argmax;
}

// Our top logit minus `token`'s after `tokens`.
double OurGap(model::LlamaModel& m, int32_t context, const std::vector<int32_t>& tokens,
              int32_t token) {
  ThreadPool pool(1);
  model::SequenceRunner runner(&m, context, &pool);
  std::vector<float> logits;
  EXPECT_TRUE(runner.Append(tokens, false, &logits).ok());
  return logits[ArgMax(logits)] - logits[token];
}

std::vector<int32_t> CollectTokens(Target& t, size_t i) {
  std::vector<int32_t> out;
  engine::TokenEvent ev;
  for (int spin = 0; spin < 200000; ++spin) {
    while (t.Next(i, &ev)) {
      if (ev.token >= 0) out.push_back(ev.token);
      if (ev.last()) return out;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ADD_FAILURE() << "choice " << i << " never ended";
  return out;
}

class PoolFamiliesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PoolFamiliesTest, ServesGreedyTokensOfLlamaCpp) {
  const std::string name = GetParam();
  const nlohmann::json golden = testing::ReadArchGolden(name);
  const std::string path = testing::RegenerateArchGolden(golden["make_random"], name, "pool_families");
  const int32_t context = golden["context"].get<int32_t>();
  auto model = model::LlamaModel::Load(path, /*use_mmap=*/true, context);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto vocab = tok::LoadVocab((*model)->file());
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  auto tokenizer = tok::Tokenizer::Create(std::move(vocab).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();

  auto registry = std::make_shared<metrics::Registry>();
  engine::EngineConfig cfg;
  cfg.metrics = registry;
  cfg.kv.blocks = 64;
  cfg.sched.max_context = context;
  cfg.threads = 2;
  cfg.warmup = false;
  auto pm = PoolModel::Create(name, model->get(), tokenizer->get(), cfg);
  ASSERT_TRUE(pm.ok()) << pm.status().ToString();
  ModelPool pool({/*max_concurrent=*/4, 8, 1 << 20}, registry);
  pool.Add(std::move(pm).value());
  PoolModel* served = pool.Find(name);
  ASSERT_NE(served, nullptr);
  EXPECT_EQ(served->model->config().arch_name, golden["make_random"]["arch"].get<std::string>());

  const auto& cases = golden["cases"];
  ASSERT_GE(cases.size(), 2u);
  GenerationSpec s;
  for (size_t i = 0; i < 2; ++i)
    s.prompts.push_back({true, "", cases[i]["tokens"].get<std::vector<int32_t>>()});
  s.max_tokens = static_cast<int32_t>(cases[0]["greedy"].size());
  s.sampling.temperature = 0.0f;
  s.ignore_eos = true;
  EngineTarget t(served);
  auto prepared = t.Prepare(s);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  ASSERT_TRUE(t.Start(std::move(prepared).value(), [] {}).ok());

  // Both choices end before the checks run the model on this thread (Forward: one caller at
  // a time).
  std::vector<std::vector<int32_t>> tokens;
  for (size_t i = 0; i < 2; ++i) tokens.push_back(CollectTokens(t, i));
  for (int i = 0; i < 400 && served->engine->Stats().kv.request_blocks != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(served->engine->Stats().kv.request_blocks, 0) << name;
  for (size_t i = 0; i < 2; ++i) {
    const auto prompt = cases[i]["tokens"].get<std::vector<int32_t>>();
    const auto llama = cases[i]["greedy"].get<std::vector<int32_t>>();
    const auto margin = cases[i]["greedy_margin"].get<std::vector<double>>();
    const std::vector<int32_t>& got = tokens[i];
    ASSERT_EQ(got.size(), llama.size()) << name << " case " << i;
    const std::string what = name + " case " + std::to_string(i);
    EXPECT_GE(CheckAgainstPlainPath(**model, context, prompt, got, what),
              static_cast<int>(got.size()) - 2)
        << what << ": more than 2 near-ties broken the other way";
    size_t same = 0;
    while (same < llama.size() && got[same] == llama[same]) ++same;
    if (same < llama.size()) {  // the first difference must be a near-tie
      std::vector<int32_t> upto = prompt;
      upto.insert(upto.end(), llama.begin(), llama.begin() + static_cast<std::ptrdiff_t>(same));
      const double gap = OurGap(**model, context, upto, llama[same]);
      EXPECT_TRUE(margin[same] <= kNearTie || gap <= kNearTie)
          << name << " case " << i << " step " << same << ": llama.cpp's margin " << margin[same]
          << ", our gap " << gap;
    }
    std::printf("%s case %zu: %zu of %zu tokens as llama.cpp's before the first difference\n",
                name.c_str(), i, same, llama.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Families, PoolFamiliesTest,
                         ::testing::ValuesIn(testing::kArchGoldens), testing::ArchGoldenParamName);

}  // namespace
}  // namespace tarmac::router
