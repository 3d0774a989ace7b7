// The response cache's targets on a real model (wp-1m): what a miss records, replayed, is
// event for event what the engine produced; failed or cancelled runs are not recorded; the
// encoding survives a round trip and refuses damaged bytes.
#include "cache/response_targets.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "common/test_util.h"
#include "engine/engine_test_util.h"
#include "router/model_pool.h"

namespace tarmac::cache {
namespace {

std::unique_ptr<router::PoolModel> Make() {
  testing::LoadedModel& m = testing::CachedModel(testing::kWp1m);
  engine::EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.warmup = false;
  return std::move(router::PoolModel::Create("wp-1m", m.model.get(), m.tok.get(), cfg).value());
}

router::GenerationSpec Spec() {
  router::GenerationSpec s;
  s.prompts.push_back({false, "Prince Andrew", {}});
  s.prompts.push_back({false, "Natasha", {}});
  s.n = 2;
  s.max_tokens = 7;
  s.sampling.temperature = 0.0f;
  s.sampling.top_logprobs = 2;
  s.ignore_eos = true;
  return s;
}

// Every event of every choice, polling until each has finished.
std::vector<std::vector<engine::TokenEvent>> Drain(router::Target& t, size_t choices) {
  std::vector<std::vector<engine::TokenEvent>> out(choices);
  size_t done = 0;
  for (int spin = 0; spin < 50000 && done < choices; ++spin) {
    for (size_t i = 0; i < choices; ++i) {
      engine::TokenEvent ev;
      while ((out[i].empty() || !out[i].back().last()) && t.Next(i, &ev)) {
        out[i].push_back(ev);
        if (ev.last()) ++done;
      }
    }
    if (done < choices) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_EQ(done, choices);
  return out;
}

void ExpectSameEvents(const std::vector<engine::TokenEvent>& a, const std::vector<engine::TokenEvent>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) {
    EXPECT_EQ(a[j].token, b[j].token);
    EXPECT_EQ(a[j].text, b[j].text);
    EXPECT_EQ(a[j].logprob, b[j].logprob);
    ASSERT_EQ(a[j].top.size(), b[j].top.size());
    for (size_t k = 0; k < a[j].top.size(); ++k) {
      EXPECT_EQ(a[j].top[k].id, b[j].top[k].id);
      EXPECT_EQ(a[j].top[k].logprob, b[j].top[k].logprob);
    }
    EXPECT_EQ(a[j].finish, b[j].finish);
  }
}

TEST(ResponseTargets, AReplayIsTheRecordedRunEventForEvent) {
  auto pm = Make();
  std::optional<RecordedResponse> stored;
  RecordingTarget rec(std::make_unique<router::EngineTarget>(pm.get()), [&](RecordedResponse r) { stored = std::move(r); });
  auto p = rec.Prepare(Spec());
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(rec.Start(std::move(p).value(), [] {}).ok());
  const auto seen = Drain(rec, 4);
  EXPECT_FALSE(stored.has_value());  // only once the job says it finished
  rec.Finished("cmpl-1", false);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->model, "wp-1m");
  EXPECT_EQ(stored->prompt_index, (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(stored->total_output_tokens(), 4 * 7);

  auto decoded = DecodeRecorded(EncodeRecorded(*stored));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  ReplayTarget replay(pm.get(), std::move(decoded).value());
  auto rp = replay.Prepare(Spec());
  ASSERT_TRUE(rp.ok());
  EXPECT_EQ(rp->prompt_index, stored->prompt_index);
  EXPECT_EQ(rp->prompt_tokens, stored->prompt_tokens);
  EXPECT_TRUE(rp->requests.empty());  // nothing reaches an engine
  ASSERT_TRUE(replay.Start(std::move(rp).value(), [] {}).ok());
  const auto replayed = Drain(replay, 4);
  for (size_t i = 0; i < 4; ++i) ExpectSameEvents(seen[i], replayed[i]);
  // The whole prompt counts as cached on a hit.
  EXPECT_EQ(replayed[0].back().metrics.cached_prompt_tokens, replayed[0].back().metrics.prompt_tokens);
}

TEST(ResponseTargets, FailedOrCancelledRunsAreNotRecorded) {
  auto pm = Make();
  int stored = 0;
  {
    RecordingTarget rec(std::make_unique<router::EngineTarget>(pm.get()), [&](RecordedResponse) { ++stored; });
    ASSERT_TRUE(rec.Start(std::move(rec.Prepare(Spec()).value()), [] {}).ok());
    Drain(rec, 4);
    rec.Finished("cmpl-2", /*error=*/true);
  }
  {
    router::GenerationSpec s = Spec();
    s.max_tokens = 400;
    RecordingTarget rec(std::make_unique<router::EngineTarget>(pm.get()), [&](RecordedResponse) { ++stored; });
    ASSERT_TRUE(rec.Start(std::move(rec.Prepare(s).value()), [] {}).ok());
    rec.Cancel();
    Drain(rec, 4);
    rec.Finished("cmpl-3", false);
  }
  EXPECT_EQ(stored, 0);
}

TEST(RecordedResponse, DamagedBytesAreAnErrorNotACrash) {
  RecordedResponse r;
  r.model = "m";
  r.prompt_index = {0};
  r.prompt_tokens = {3};
  engine::TokenEvent e;
  e.token = 5;
  e.text = std::string("\xe2\x82", 2);  // a partial character survives
  e.finish = engine::FinishReason::kLength;
  r.choices = {{e}};
  r.route = router::RouteInfo{"auto", "cascade", "m", "confident", false, "", true};
  const std::string bytes = EncodeRecorded(r);
  auto back = DecodeRecorded(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->choices[0][0].text, e.text);
  EXPECT_EQ(back->route->reason, "confident");
  EXPECT_TRUE(back->route->fallback);
  for (size_t cut : {size_t{0}, size_t{1}, bytes.size() / 2, bytes.size() - 1})
    EXPECT_FALSE(DecodeRecorded(std::string_view(bytes).substr(0, cut)).ok()) << cut;
  std::string flipped = bytes;
  flipped[flipped.size() / 3] ^= 0x5a;
  (void)DecodeRecorded(flipped);  // whatever it says, it says it without crashing
}

}  // namespace
}  // namespace tarmac::cache
