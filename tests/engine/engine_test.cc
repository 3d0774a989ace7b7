// EngineCore / EngineClient on the real wp models: batched, chunked, paged, prefix-cached and
// preempted runs give the same greedy tokens as each request run alone.
#include "engine/engine_client.h"
#include "engine/engine_core.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "base/clock.h"
#include "common/test_util.h"
#include "kernels/dispatch.h"
#include "engine_test_util.h"

namespace tarmac::engine {
namespace {

using Loaded = testing::LoadedModel;
using testing::kWp1m;
constexpr auto Get = testing::CachedModel;
constexpr auto Load = testing::LoadModel;

EngineRequest Greedy(std::vector<int32_t> prompt, int32_t max_tokens, uint64_t ns = 0) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.ns = ns;
  return r;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // per token
  std::string text;
  TokenEvent last;
};

Outcome Drain(RequestStream& s) {
  Outcome o;
  TokenEvent ev;
  while (true) {
    EXPECT_TRUE(s.Next(&ev, std::chrono::seconds(120))) << "stream stalled";
    if (ev.token >= 0) o.tokens.push_back(ev.token);
    if (ev.token >= 0) o.logprobs.push_back(ev.logprob);
    o.text += ev.text;
    if (ev.last()) break;
  }
  o.last = std::move(ev);
  return o;
}

// Drives a core to completion, checking integrity after every step.
void RunToEnd(EngineCore& core) {
  for (int guard = 0; !core.idle() && guard < 100000; ++guard) {
    core.Step();
    ASSERT_TRUE(core.CheckIntegrity().ok()) << core.CheckIntegrity().message();
  }
  ASSERT_TRUE(core.idle());
}

Outcome RunAloneOutcome(Loaded& m, const EngineRequest& r) {
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.kv.prefix_cache = false;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  auto stream = std::make_shared<RequestStream>(1);
  EXPECT_TRUE(core->Add(1, r, stream).ok());
  RunToEnd(*core);
  return Drain(*stream);
}

std::vector<int32_t> RunAlone(Loaded& m, const EngineRequest& r) { return RunAloneOutcome(m, r).tokens; }

// Prompts of mixed lengths; some share a long start so the prefix cache has work.
std::vector<std::vector<int32_t>> Prompts(const tok::Tokenizer& t) {
  const std::string shared =
      "Well, Prince, so Genoa and Lucca are now just family estates of the Buonapartes. But I "
      "warn you, if you don't tell me that this means war, if you still try to defend the "
      "infamies and horrors perpetrated by that Antichrist, I really believe he is Antichrist.";
  const std::vector<std::string> texts = {
      shared + " And what",
      "It was in July, 1805,",
      shared + " Anna Pavlovna had had a cough for some days. She was, as she said,",
      "Pierre",
      shared + " I will have nothing more to do with you and you are no longer my friend, no "
               "longer my faithful slave, as you call yourself! But how do you do?",
      "The prince answered nothing, but she looked at him significantly, awaiting a reply.",
  };
  std::vector<std::vector<int32_t>> out;
  for (const auto& s : texts) out.push_back(t.Encode(s));
  return out;
}

class EngineTest : public ::testing::TestWithParam<std::tuple<bool, int>> {};

// N concurrent requests, chunked prefill (budget below the longest prompt), prefix cache on and
// off, and a pool too small for all of them at once (forces preemption in one variant).
TEST_P(EngineTest, ConcurrentMatchesAlone) {
  const auto [prefix_cache, kv_blocks] = GetParam();
  Loaded& m = Get(testing::kWp11m);
  const auto prompts = Prompts(*m.tok);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(RunAlone(m, Greedy(p, 24)));

  EngineConfig cfg;
  cfg.kv.blocks = kv_blocks;
  cfg.kv.prefix_cache = prefix_cache;
  cfg.sched.max_batched_tokens = 40;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    streams.push_back(std::make_shared<RequestStream>(i));
    EXPECT_TRUE(core->Add(static_cast<int64_t>(i), Greedy(prompts[i], 24), streams.back()).ok());
    if (i == 2) {  // later arrivals join while the first ones decode
      for (int s = 0; s < 3; ++s) core->Step();
    }
  }
  RunToEnd(*core);
  for (size_t i = 0; i < prompts.size(); ++i) {
    Outcome o = Drain(*streams[i]);
    EXPECT_EQ(o.tokens, alone[i]) << "request " << i;
    EXPECT_EQ(o.last.finish, FinishReason::kLength);
    EXPECT_EQ(o.last.metrics.output_tokens, 24);
  }
  const EngineStats st = core->Stats();
  if (prefix_cache) {
    EXPECT_GT(st.sched.prefix_hit_tokens, 0);
  } else {
    EXPECT_EQ(st.sched.prefix_hit_tokens, 0);
  }
  if (kv_blocks < 20) {
    EXPECT_GT(st.sched.preemptions, 0);
  }
  EXPECT_EQ(st.kv.request_blocks, 0);
  EXPECT_EQ(st.kv.free_blocks + st.kv.cached_only_blocks, st.kv.total_blocks);
}

INSTANTIATE_TEST_SUITE_P(PrefixAndPool, EngineTest,
                         ::testing::Values(std::make_tuple(true, 256), std::make_tuple(false, 256),
                                           std::make_tuple(true, 14), std::make_tuple(false, 14)));

// Seeded sampling repeats whatever a request is batched with: with the dispatch table's
// batch-invariant f16 products, a request's logits, and so its sampled tokens and their
// logprobs, are bit-identical run alone and run among others (chunked prefill, prefix hits,
// decode batches of changing size). Fails if any product a step makes sums in an order that
// depends on the step's token count.
TEST(EngineCoreTest, SeededSamplingDoesNotDependOnTheBatch) {
  if (kernels::WantsAmxCopy(DType::kF16)) {
    GTEST_SKIP() << "f16 runs on AMX tiles from a few tokens here (split-bf16), which sum in "
                    "another order than one token's products";
  }
  Loaded& m = Get(testing::kWp11m);
  const auto prompts = Prompts(*m.tok);
  auto sampled = [&](size_t i) {
    EngineRequest r = Greedy(prompts[i], 20);
    r.sampling.temperature = 0.9f;
    r.sampling.seed = 100 + i;
    return r;
  };
  std::vector<Outcome> alone;
  for (size_t i = 0; i < prompts.size(); ++i) alone.push_back(RunAloneOutcome(m, sampled(i)));
  EngineConfig cfg;
  cfg.kv.blocks = 256;
  cfg.kv.prefix_cache = true;
  cfg.sched.max_batched_tokens = 40;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    streams.push_back(std::make_shared<RequestStream>(i));
    EXPECT_TRUE(core->Add(static_cast<int64_t>(i), sampled(i), streams.back()).ok());
    core->Step();  // staggered arrivals: every batch shape from 1 token up
  }
  RunToEnd(*core);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome o = Drain(*streams[i]);
    EXPECT_EQ(o.tokens, alone[i].tokens) << "request " << i;
    ASSERT_EQ(o.logprobs.size(), alone[i].logprobs.size());
    EXPECT_EQ(0, std::memcmp(o.logprobs.data(), alone[i].logprobs.data(), o.logprobs.size() * 4))
        << "request " << i << ": logprobs differ in their bits";
  }
  EXPECT_GT(core->Stats().sched.prefix_hit_tokens, 0);
}

// A prompt one token past a block boundary, sent again, hits the cache for all its blocks
// and computes its last token alone (a tile of one): its logits, and so the seeded samples and
// logprobs, are bit-identical to the first run's, which computed that token inside the whole
// prompt. Fails if a lone token's attention (or any product) sums in another order.
TEST(EngineCoreTest, PrefixHitWithAOneTokenTailRepeatsTheSeededRun) {
  if (kernels::WantsAmxCopy(DType::kF16)) {
    GTEST_SKIP() << "f16 runs on AMX tiles from a few tokens here (split-bf16)";
  }
  Loaded& m = Get(testing::kWp11m);
  std::vector<int32_t> prompt = Prompts(*m.tok)[4];
  ASSERT_GE(prompt.size(), 17u);
  prompt.resize(17);  // a block of 16 and one token: the first run's 17 share one query tile
  EngineRequest r = Greedy(prompt, 16);
  r.sampling.temperature = 0.9f;
  r.sampling.seed = 42;
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.kv.prefix_cache = true;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  Outcome runs[2];
  for (int i = 0; i < 2; ++i) {
    auto stream = std::make_shared<RequestStream>(i);
    ASSERT_TRUE(core->Add(i, r, stream).ok());
    RunToEnd(*core);
    runs[i] = Drain(*stream);
  }
  EXPECT_EQ(runs[0].last.metrics.cached_prompt_tokens, 0);
  EXPECT_EQ(runs[1].last.metrics.cached_prompt_tokens, 16);
  EXPECT_EQ(runs[1].tokens, runs[0].tokens);
  ASSERT_EQ(runs[1].logprobs.size(), runs[0].logprobs.size());
  EXPECT_EQ(0, std::memcmp(runs[1].logprobs.data(), runs[0].logprobs.data(), runs[0].logprobs.size() * 4))
      << "logprobs differ in their bits";
}

TEST(EngineCoreTest, NoPrefixHitAcrossNamespaces) {
  Loaded& m = Get(testing::kWp11m);
  EngineConfig cfg;
  cfg.kv.blocks = 128;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  const auto prompt = Prompts(*m.tok)[4];
  auto run = [&](uint64_t ns) {
    auto s = std::make_shared<RequestStream>(0);
    static int64_t id = 100;
    EXPECT_TRUE(core->Add(id++, Greedy(prompt, 4, ns), s).ok());
    RunToEnd(*core);
    return Drain(*s);
  };
  const Outcome a = run(/*ns=*/1);
  EXPECT_EQ(a.last.metrics.cached_prompt_tokens, 0);
  const Outcome b = run(/*ns=*/2);  // identical prompt, other tenant
  EXPECT_EQ(b.last.metrics.cached_prompt_tokens, 0);
  const Outcome c = run(/*ns=*/1);
  EXPECT_EQ(c.last.metrics.cached_prompt_tokens,
            (static_cast<int32_t>(prompt.size()) - 1) / 16 * 16);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens, c.tokens);
}

// Arrivals, cancellations and a tiny pool forcing eviction and preemption, several
// namespaces; integrity after every step; completed requests match their solo runs.
TEST(EngineCoreTest, RandomisedWorkloadWithTinyPool) {
  Loaded& m = Get(kWp1m);
  std::mt19937_64 rng(7);
  const auto base = Prompts(*m.tok);
  EngineConfig cfg;
  cfg.kv.blocks = 24;
  cfg.sched.block_size = 8;
  cfg.sched.max_batched_tokens = 24;
  cfg.sched.max_running = 6;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  std::map<int64_t, std::pair<EngineRequest, std::shared_ptr<RequestStream>>> live;
  std::vector<std::pair<EngineRequest, Outcome>> done;
  int64_t next = 0;
  int cancelled = 0;
  for (int step = 0; step < 600 && (next < 40 || !core->idle()); ++step) {
    if (next < 40 && rng() % 2 == 0) {
      auto p = base[rng() % base.size()];
      p.resize(1 + rng() % p.size());
      EngineRequest r = Greedy(p, 1 + static_cast<int32_t>(rng() % 24), rng() % 3);
      r.priority = static_cast<int32_t>(rng() % 2);
      ASSERT_TRUE(core->Validate(r).ok()) << core->Validate(r).status().message();
      auto s = std::make_shared<RequestStream>(next);
      EXPECT_TRUE(core->Add(next, r, s).ok());
      live[next++] = {r, s};
    }
    if (rng() % 15 == 0 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      core->Cancel(it->first);
      Outcome o = Drain(*it->second.second);
      EXPECT_EQ(o.last.finish, FinishReason::kCancelled);
      live.erase(it);
      ++cancelled;
    }
    core->Step();
    ASSERT_TRUE(core->CheckIntegrity().ok()) << core->CheckIntegrity().message();
    for (auto it = live.begin(); it != live.end();) {
      if (it->second.second->done()) {
        done.push_back({it->second.first, Drain(*it->second.second)});
        it = live.erase(it);
      } else {
        ++it;
      }
    }
  }
  ASSERT_TRUE(core->idle());
  const EngineStats st = core->Stats();
  EXPECT_EQ(st.kv.request_blocks, 0);
  EXPECT_EQ(st.kv.free_blocks + st.kv.cached_only_blocks, st.kv.total_blocks);
  EXPECT_GT(st.sched.preemptions + st.sched.evicted_blocks, 0);
  EXPECT_GT(done.size(), 20u);
  for (auto& [req, out] : done) EXPECT_EQ(out.tokens, RunAlone(m, req));
  std::printf("finished %zu, cancelled %d, preemptions %lld, evicted blocks %lld\n", done.size(),
              cancelled, static_cast<long long>(st.sched.preemptions),
              static_cast<long long>(st.sched.evicted_blocks));
}

TEST(EngineClientTest, StreamsCancelsAndRejects) {
  Loaded& m = Get(testing::kWp11m);
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.threads = 2;
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  client->set_check_integrity(true);
  const auto prompts = Prompts(*m.tok);

  // Same as alone, through the thread.
  auto s = client->Submit(Greedy(prompts[1], 12));
  ASSERT_TRUE(s.ok());
  Outcome o = Drain(**s);
  EXPECT_EQ(o.tokens, RunAlone(m, Greedy(prompts[1], 12)));
  EXPECT_EQ(o.text, m.tok->Decode(o.tokens));
  EXPECT_GT(o.last.metrics.ttft_s, 0.0);
  EXPECT_EQ(o.last.metrics.itl_s.size(), 11u);

  // Cancel mid-stream: the final event says so and every block comes back.
  auto c = client->Submit(Greedy(prompts[0], 400));
  ASSERT_TRUE(c.ok());
  TokenEvent ev;
  ASSERT_TRUE((*c)->Next(&ev, std::chrono::seconds(60)));
  client->Cancel((*c)->id());
  Outcome rest = Drain(**c);
  EXPECT_EQ(rest.last.finish, FinishReason::kCancelled);
  for (int i = 0; i < 100 && client->Stats().kv.request_blocks != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(client->Stats().kv.request_blocks, 0);

  // Rejected before queuing, with the reason.
  auto too_long = client->Submit(Greedy(prompts[0], 100000));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("exceeds the context"), std::string::npos);
  EngineRequest bad = Greedy({1, 2, 3}, 4);
  bad.sampling.top_p = 2.0f;
  EXPECT_FALSE(client->Submit(bad).ok());
  EXPECT_FALSE(client->Submit(Greedy({1, 999999}, 4)).ok());
  EXPECT_FALSE(client->Submit(Greedy({}, 4)).ok());
  EXPECT_FALSE(client->Submit(Greedy({1}, 0)).ok());
}

// A request submitted while a long step runs waits in the client's inbox until that step ends:
// its reported queue time and TTFT count that wait (from Submit), as its caller sees it.
TEST(EngineClientTest, TtftCountsTheWaitBehindTheStepInProgress) {
  Loaded& m = Get(testing::kWp11m);
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.threads = 2;
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  std::vector<int32_t> long_prompt;
  const auto prompts = Prompts(*m.tok);
  while (long_prompt.size() < 480) long_prompt.insert(long_prompt.end(), prompts[0].begin(), prompts[0].end());
  long_prompt.resize(480);
  auto a = client->Submit(Greedy(long_prompt, 1));  // one step of 480 prompt tokens
  ASSERT_TRUE(a.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // its step has begun
  const double t0 = NowSeconds();
  auto b = client->Submit(Greedy(prompts[1], 1));
  ASSERT_TRUE(b.ok());
  Outcome ob = Drain(**b);
  const double seen = NowSeconds() - t0;
  Drain(**a);
  const RequestMetrics& mb = ob.last.metrics;
  std::printf("B: seen by the caller %.1f ms, reported ttft %.1f ms, queue %.1f ms\n", seen * 1e3,
              mb.ttft_s * 1e3, mb.queue_s * 1e3);
  EXPECT_LE(mb.ttft_s, seen);
  EXPECT_GE(mb.ttft_s, 0.8 * seen - 1e-3);  // only the stream hand-off is not counted
  EXPECT_LE(mb.queue_s, mb.ttft_s);
}

// Create warms the model up first (EngineConfig::warmup); that leaves no trace a dashboard or
// the next request could see: no step, request, token, block or prefix-cache lookup.
TEST(EngineClientTest, WarmupCountsNothing) {
  Loaded& m = Get(testing::kWp11m);
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.threads = 2;
  ASSERT_TRUE(cfg.warmup);
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  const EngineStats st = client->Stats();
  EXPECT_EQ(st.steps, 0);
  EXPECT_EQ(st.requests_finished, 0);
  EXPECT_EQ(st.prompt_tokens, 0);
  EXPECT_EQ(st.generation_tokens, 0);
  EXPECT_EQ(st.kv.free_blocks, st.kv.total_blocks);
  EXPECT_EQ(st.sched.prefix_queried_tokens, 0);
  const auto prompt = Prompts(*m.tok)[2];
  Outcome o = Drain(**client->Submit(Greedy(prompt, 10)));
  EXPECT_EQ(o.tokens, RunAlone(m, Greedy(prompt, 10)));
  EXPECT_EQ(o.last.metrics.cached_prompt_tokens, 0);
}

TEST(EngineClientTest, StopStringsEndTheRequestAndAreNotEmitted) {
  Loaded& m = Get(testing::kWp11m);
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  const auto prompt = Prompts(*m.tok)[1];
  Outcome free_run = Drain(**client->Submit(Greedy(prompt, 40)));
  ASSERT_GT(free_run.text.size(), 12u);
  // Pick a stop string from the middle of the unconstrained output.
  const std::string stop = free_run.text.substr(8, 3);
  const size_t at = free_run.text.find(stop);
  EngineRequest r = Greedy(prompt, 40);
  r.stop = {stop};
  Outcome o = Drain(**client->Submit(r));
  EXPECT_EQ(o.last.finish, FinishReason::kStop);
  EXPECT_EQ(o.text, free_run.text.substr(0, at));
}

TEST(EngineClientTest, SeveralEnginesInOneProcess) {
  Loaded& a = Get(testing::kWp11m);
  Loaded& b = Get(kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 32;
  auto ea = std::move(EngineClient::Create(a.model.get(), a.tok.get(), cfg).value());
  auto eb = std::move(EngineClient::Create(b.model.get(), b.tok.get(), cfg).value());
  const auto p = Prompts(*a.tok)[3];
  auto sa = ea->Submit(Greedy(p, 8));
  auto sb = eb->Submit(Greedy(p, 8));
  // Drain both before the solo runs: a model runs one forward at a time.
  const Outcome oa = Drain(**sa), ob = Drain(**sb);
  EXPECT_EQ(oa.tokens, RunAlone(a, Greedy(p, 8)));
  EXPECT_EQ(ob.tokens, RunAlone(b, Greedy(p, 8)));
}

TEST(EngineClientTest, ShutdownFailsLiveRequests) {
  Loaded& m = Get(kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  auto s = client->Submit(Greedy({1, 2, 3}, 500));
  ASSERT_TRUE(s.ok());
  client->Shutdown();
  Outcome o = Drain(**s);
  EXPECT_EQ(o.last.finish, FinishReason::kError);
  EXPECT_FALSE(client->Submit(Greedy({1, 2, 3}, 5)).ok());
}

TEST(EngineCoreTest, BadConfigIsRejected) {
  Loaded& m = Get(kWp1m);
  EngineConfig cfg;
  cfg.sched.max_context = 1 << 20;
  auto r = EngineCore::Create(m.model.get(), m.tok.get(), cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("training context"), std::string::npos);
  cfg = EngineConfig();
  cfg.kv.memory_bytes = 10;
  EXPECT_FALSE(EngineCore::Create(m.model.get(), m.tok.get(), cfg).ok());
}

}  // namespace
}  // namespace tarmac::engine
