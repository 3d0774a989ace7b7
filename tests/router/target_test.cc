// The pool's pieces on a real model (wp-1m): Prepare (encoding, fan-out, defaults, errors that
// name the API field), EngineTarget (streams, hold-back of the first k tokens, cancel), the
// pool's waiting gauge, and prefix namespaces.
#include <gtest/gtest.h>

#include <thread>

#include "base/thread_role.h"
#include "common/test_util.h"
#include "engine/engine_test_util.h"
#include "metrics/registry.h"
#include "router/model_pool.h"
#include "router/target.h"

namespace tarmac::router {
namespace {

using Json = nlohmann::ordered_json;

std::unique_ptr<PoolModel> Make(std::shared_ptr<metrics::Registry> reg = nullptr) {
  testing::LoadedModel& m = testing::CachedModel(testing::kWp1m);
  engine::EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.warmup = false;
  cfg.metrics = std::move(reg);
  return std::move(PoolModel::Create("wp-1m", m.model.get(), m.tok.get(), cfg).value());
}

GenerationSpec Completion(std::string prompt, int32_t max_tokens) {
  GenerationSpec s;
  s.prompts.push_back({false, std::move(prompt), {}});
  s.max_tokens = max_tokens;
  s.sampling.temperature = 0.0f;
  s.ignore_eos = true;
  return s;
}

TEST(Prepare, FansOutChoicesWithSeedsAndDefaults) {
  auto pm = Make();
  GenerationSpec s = Completion("Prince Andrew", 5);
  s.prompts.push_back({true, "", {10, 11, 12}});
  s.n = 3;
  s.sampling.seed = 40;
  auto p = Prepare(*pm, s);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->requests.size(), 6u);
  EXPECT_EQ(p->prompt_index, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(*p->requests[2].request().sampling.seed, 42u);
  EXPECT_EQ(p->requests[3].request().prompt, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(p->prompt_tokens[1], 3);
  EXPECT_NE(p->requests[0].request().bucket, metrics::kNoBucket);
  EXPECT_EQ(p->admission_tokens, 3 * (p->prompt_tokens[0] + 5) + 3 * (3 + 5));
  // Completions default to 16 tokens; chat to the rest of the context.
  s = Completion("Pierre", 5);
  s.max_tokens.reset();
  EXPECT_EQ(Prepare(*pm, s)->requests[0].request().max_tokens, 16);
  GenerationSpec chat;
  chat.chat = true;
  chat.messages = Json::parse(R"([{"role":"user","content":"Hi"}])");
  auto c = Prepare(*pm, chat);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->requests[0].request().max_tokens + c->prompt_tokens[0], pm->max_context);
}

TEST(Prepare, ErrorsNameTheApiField) {
  auto pm = Make();
  GenerationSpec s = Completion("x", 5);
  s.prompts[0] = {true, "", {1, 999999}};
  EXPECT_EQ(Prepare(*pm, s).status().field(), "prompt");
  s = Completion("Prince", pm->max_context);
  Status st = Prepare(*pm, s).status();
  EXPECT_EQ(st.field(), "max_tokens");
  EXPECT_EQ(st.reason(), "context_length_exceeded");
  s = Completion("Prince", 4);
  s.sampling.top_p = 7;
  EXPECT_EQ(Prepare(*pm, s).status().field(), "top_p");
  s = Completion("Prince", 4);
  s.sampling.logit_bias = {{5000000, 1.0f}};
  EXPECT_EQ(Prepare(*pm, s).status().field(), "logit_bias");
  // A chat prompt's problem is about `messages`.
  GenerationSpec chat;
  chat.chat = true;
  std::string long_text;
  for (int i = 0; i < 2000; ++i) long_text += "Prince Andrew ";
  chat.messages = Json::array({Json{{"role", "user"}, {"content", long_text}}});
  st = Prepare(*pm, chat).status();
  EXPECT_EQ(st.field(), "messages");
  EXPECT_EQ(st.reason(), "context_length_exceeded");
}

std::vector<engine::TokenEvent> Collect(Target& t, size_t i, int32_t want_last = 1) {
  std::vector<engine::TokenEvent> out;
  engine::TokenEvent ev;
  for (int spin = 0; spin < 20000; ++spin) {
    while (t.Next(i, &ev)) {
      out.push_back(ev);
      if (ev.last() && --want_last == 0) return out;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ADD_FAILURE() << "no last event";
  return out;
}

TEST(EngineTarget, StreamsEveryChoice) {
  auto pm = Make();
  EngineTarget t(pm.get());
  GenerationSpec s = Completion("Natasha", 6);
  s.n = 2;
  ASSERT_TRUE(t.Start(std::move(t.Prepare(s).value()), [] {}).ok());
  for (size_t i = 0; i < 2; ++i) {
    auto ev = Collect(t, i);
    ASSERT_FALSE(ev.empty());
    EXPECT_EQ(ev.back().finish, engine::FinishReason::kLength);
    EXPECT_EQ(ev.back().metrics.output_tokens, 6);
  }
}

// Nothing is released before a choice has its first k tokens (or ends); then everything is.
// wp-11m's steps take long enough that a poll every 50 us sees single tokens arrive.
TEST(EngineTarget, HoldsBackTheFirstKTokens) {
  testing::LoadedModel& m = testing::CachedModel(testing::kWp11m);
  engine::EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.warmup = false;
  auto pm = std::move(PoolModel::Create("wp-11m", m.model.get(), m.tok.get(), cfg).value());
  const int32_t k = 8;
  auto first_release = [&](int32_t hold_back, int32_t max_tokens) {
    EngineTarget t(pm.get(), hold_back);
    EXPECT_TRUE(t.Start(std::move(t.Prepare(Completion("The count", max_tokens)).value()), [] {}).ok());
    engine::TokenEvent ev;
    int32_t first = 0, total = 0;
    bool last = false;
    for (int spin = 0; spin < 400000 && !last; ++spin) {
      int32_t batch = 0;
      while (t.Next(0, &ev)) {
        batch += ev.token >= 0 ? 1 : 0;
        last = ev.last();
      }
      if (first == 0) first = batch;
      total += batch;
      if (batch == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    EXPECT_TRUE(last);
    EXPECT_EQ(total, max_tokens);
    return first;
  };
  EXPECT_GE(first_release(k, 40), k);  // (without hold-back the first release is mostly 1 token)
  EXPECT_EQ(first_release(k, 3), 3);   // a choice shorter than k is released when it ends
}

TEST(EngineTarget, CancelEndsEveryChoiceAndFreesItsBlocks) {
  auto pm = Make();
  EngineTarget t(pm.get(), /*hold_back_tokens=*/4);
  GenerationSpec s = Completion("Moscow", 400);
  s.n = 2;
  ASSERT_TRUE(t.Start(std::move(t.Prepare(s).value()), [] {}).ok());
  t.Cancel();
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(Collect(t, i).back().finish, engine::FinishReason::kCancelled);
  for (int i = 0; i < 200 && pm->engine->Stats().kv.request_blocks != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(pm->engine->Stats().kv.request_blocks, 0);
}

TEST(ModelPool, WaitingGaugeCountsTheAdmissionQueue) {
  auto reg = std::make_shared<metrics::Registry>();
  ModelPool pool({/*max_concurrent=*/1, 8, 1 << 20}, reg);
  pool.Add(Make(reg));
  ASSERT_NE(pool.Find("wp-1m"), nullptr);
  EXPECT_EQ(pool.Find("nope"), nullptr);
  EXPECT_EQ(pool.admission().Arrive("wp-1m", 1, 10, 0), Admission::Decision::kRun);
  EXPECT_EQ(pool.admission().Arrive("wp-1m", 2, 10, 0), Admission::Decision::kQueued);
  EXPECT_EQ(pool.admission().Arrive("wp-1m", 3, 10, 0), Admission::Decision::kQueued);
  const metrics::FamilySnapshot family = reg->Collect("tarmac:num_requests_waiting", 0);
  const metrics::SeriesSnapshot* s = family.Find({"wp-1m"});
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->value, 2);
}

TEST(PrefixNamespace, DiffersByTenantAndModel) {
  EXPECT_EQ(PrefixNamespace("a", "m"), PrefixNamespace("a", "m"));
  EXPECT_NE(PrefixNamespace("a", "m"), PrefixNamespace("b", "m"));
  EXPECT_NE(PrefixNamespace("a", "m"), PrefixNamespace("a", "n"));
}

// The server's I/O thread never renders or encodes, except for work it judged cheap.
TEST(PrepareDeathTest, NeverOnTheIoThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the engine has threads
  auto pm = Make();
  const GenerationSpec s = Completion("Prince Andrew", 3);
  EXPECT_TRUE(Prepare(*pm, s).ok());  // an unmarked thread
  std::thread io([&] {
    MarkIoThread();
    {
      InlineWorkScope cheap;
      EXPECT_TRUE(Prepare(*pm, s).ok());
    }
    EXPECT_TRUE(OnIoThread());
  });
  io.join();
  EXPECT_DEATH(
      {
        MarkIoThread();
        (void)Prepare(*pm, s);
      },
      "never on the server's I/O thread");
}

// A spec's EncodedPrompts: each model encodes once, however often the spec is prepared.
TEST(Prepare, EncodesOncePerModelWithASharedMemo) {
  auto pm = Make();
  GenerationSpec s = Completion("Prince Andrew went to war", 3);
  s.encoded = std::make_shared<EncodedPrompts>();
  const int64_t before = pm->tokenizer->encode_calls();
  GenerationSpec copy = s;
  auto a = Prepare(*pm, s);
  auto b = Prepare(*pm, copy);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->prompts, b->prompts);
  EXPECT_EQ(pm->tokenizer->encode_calls() - before, 1);
  s.encoded.reset();
  (void)Prepare(*pm, s);
  EXPECT_EQ(pm->tokenizer->encode_calls() - before, 2);
}

TEST(Prepare, DefaultMaxTokens) {
  EXPECT_EQ(DefaultMaxTokens(false, 512, 10), 16);
  EXPECT_EQ(DefaultMaxTokens(false, 512, 500), 12);
  EXPECT_EQ(DefaultMaxTokens(true, 512, 10), 502);
}

}  // namespace
}  // namespace tarmac::router
