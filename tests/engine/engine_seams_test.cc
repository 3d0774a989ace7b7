// The engine's seams for the serving layer: runtime knobs (applied at the next step, read back,
// greedy output unchanged), the prefix-cache event stream (a replay reconstructs the cached
// blocks), and the one request-bucket definition shared by the policy and the metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "common/test_util.h"
#include "engine/engine_client.h"
#include "engine/engine_core.h"
#include "engine_test_util.h"

namespace tarmac::engine {
namespace {

using Loaded = testing::LoadedModel;
constexpr auto Get = testing::CachedModel;

EngineRequest Req(std::vector<int32_t> prompt, int32_t max_tokens, float temp = 0.0f, uint64_t ns = 0) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = temp;
  r.sampling.seed = 99;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.ns = ns;
  return r;
}

std::vector<int32_t> Ids(int32_t n, int32_t base) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 10 + (base + i * 7) % 1500;
  return v;
}

std::vector<int32_t> Tokens(RequestStream& s) {
  std::vector<int32_t> t;
  TokenEvent ev;
  while (true) {
    EXPECT_TRUE(s.Next(&ev, std::chrono::seconds(120))) << "stream stalled";
    if (ev.token >= 0) t.push_back(ev.token);
    if (ev.last()) break;
  }
  return t;
}

TEST(EngineKnobsTest, BudgetRunningCapAndPriorityApplyFromTheNextStep) {
  Loaded& m = Get(testing::kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 128;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  EXPECT_EQ(core->knobs(), core->DefaultKnobs());
  EngineKnobs k = core->knobs();
  k.max_batched_tokens = 16;  // one 40-token prompt chunk fills the step
  core->SetKnobs(k);
  for (int64_t id = 0; id < 6; ++id)
    ASSERT_TRUE(core->Add(id, Req(Ids(40, static_cast<int32_t>(id) * 100), 4), std::make_shared<RequestStream>(id)).ok());
  core->Step();
  EXPECT_EQ(core->Stats().num_running, 1);
  EXPECT_EQ(core->Stats().sched.prefix_queried_tokens, 40);
  // A running cap of 2 and a larger budget: one more is admitted, no more.
  k.max_batched_tokens = 512;
  k.max_running = 2;
  core->SetKnobs(k);
  core->Step();
  EXPECT_EQ(core->Stats().num_running, 2);
  // Holding back priority 0 while a more important request arrives.
  k.max_running = 64;
  k.admit_max_priority = -1;
  core->SetKnobs(k);
  EngineRequest urgent = Req(Ids(8, 7000), 2);
  urgent.priority = -1;
  ASSERT_TRUE(core->Add(100, urgent, std::make_shared<RequestStream>(100)).ok());
  core->Step();
  EXPECT_EQ(core->Stats().num_running, 3);  // the urgent one only
  EXPECT_EQ(core->Stats().num_waiting, 4);
  k.admit_max_priority = INT32_MAX;
  core->SetKnobs(k);
  core->Step();
  EXPECT_EQ(core->Stats().num_waiting, 0);
  for (int guard = 0; !core->idle() && guard < 1000; ++guard) core->Step();
  EXPECT_TRUE(core->idle());
  EXPECT_TRUE(core->CheckIntegrity().ok());
}

TEST(EngineKnobsTest, BadKnobsNameTheKnob) {
  Loaded& m = Get(testing::kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 32;
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  const EngineKnobs before = client->knobs();
  EngineKnobs k = before;
  k.max_running = 0;
  EXPECT_EQ(client->SetKnobs(k).field(), "max_running");
  k = client->knobs();
  k.spec_max_k = 99;
  EXPECT_EQ(client->SetKnobs(k).field(), "spec_max_k");
  k = client->knobs();
  k.bucket_max_k[12345] = 1;
  EXPECT_EQ(client->SetKnobs(k).field(), "bucket_max_k");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(client->knobs(), before);  // nothing changed
}

TEST(EngineKnobsTest, ReadBackAfterTheNextStepBoundary) {
  Loaded& m = Get(testing::kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  EngineKnobs k = client->knobs();
  k.max_batched_tokens = 33;
  k.speculation = false;
  ASSERT_TRUE(client->SetKnobs(k).ok());
  for (int i = 0; i < 500 && client->knobs() != k; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(client->knobs(), k);
}

TEST(EngineKnobsTest, FullEngineQueueRefusesSubmissions) {
  Loaded& m = Get(testing::kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  auto client = std::move(EngineClient::Create(m.model.get(), m.tok.get(), cfg).value());
  EngineKnobs k = client->knobs();
  k.max_waiting = 2;
  k.admit_max_priority = -1;  // priority 0 waits
  ASSERT_TRUE(client->SetKnobs(k).ok());
  for (int i = 0; i < 500 && client->knobs() != k; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto a = client->Submit(Req(Ids(8, 1), 2));
  auto b = client->Submit(Req(Ids(8, 2), 2));
  auto c = client->Submit(Req(Ids(8, 3), 2));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  k.admit_max_priority = INT32_MAX;
  ASSERT_TRUE(client->SetKnobs(k).ok());
  EXPECT_EQ(Tokens(**a).size(), 2u);
  EXPECT_EQ(Tokens(**b).size(), 2u);
}

// Knobs changing every few steps (budget, running cap, speculation and its k caps) never change
// what a greedy request produces.
TEST(EngineKnobsTest, GreedyOutputUnchangedWhenKnobsChangeMidRun) {
  Loaded& m = Get(testing::kWp11m);
  Loaded& draft = Get(testing::kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 256;
  cfg.spec.mode = SpecMode::kAuto;
  cfg.spec.draft_model = draft.model.get();
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back(Req(Ids(20 + 7 * i, 31 * i), 12 + i % 5));
  auto run = [&](bool churn) -> std::vector<std::vector<int32_t>> {
    auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (size_t i = 0; i < reqs.size(); ++i) {
      streams.push_back(std::make_shared<RequestStream>(static_cast<int64_t>(i)));
      EXPECT_TRUE(core->Add(static_cast<int64_t>(i), reqs[i], streams.back()).ok());
    }
    std::mt19937 rng(5);
    for (int step = 0; !core->idle() && step < 5000; ++step) {
      if (churn && step % 3 == 0) {
        EngineKnobs k = core->DefaultKnobs();
        k.max_batched_tokens = 4 + static_cast<int32_t>(rng() % 100);
        k.max_running = 1 + static_cast<int32_t>(rng() % 6);
        k.speculation = rng() % 2 == 0;
        k.spec_max_k = static_cast<int32_t>(rng() % 5);
        if (rng() % 2 == 0) k.bucket_max_k[0] = static_cast<int32_t>(rng() % 3);
        EXPECT_TRUE(core->CheckKnobs(k).ok());
        core->SetKnobs(k);
      }
      core->Step();
      EXPECT_TRUE(core->CheckIntegrity().ok()) << core->CheckIntegrity().message();
    }
    EXPECT_TRUE(core->idle());
    std::vector<std::vector<int32_t>> out;
    for (auto& s : streams) out.push_back(Tokens(*s));
    return out;
  };
  const auto steady = run(false), churned = run(true);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(churned[i], steady[i]) << "request " << i;
    EXPECT_EQ(static_cast<int32_t>(steady[i].size()), reqs[i].max_tokens);
  }
}

TEST(EngineKnobsTest, SpeculationKnobsCapTheDrafts) {
  Loaded& m = Get(testing::kWp11m);
  EngineConfig cfg;
  cfg.kv.blocks = 128;
  cfg.spec.mode = SpecMode::kNgram;
  cfg.spec.policy_config.max_k = 4;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  EngineKnobs k = core->knobs();
  k.spec_max_k = 1;
  core->SetKnobs(k);
  // A repetitive prompt: n-gram lookup has something to propose at every step.
  std::vector<int32_t> p;
  for (int i = 0; i < 12; ++i) p.insert(p.end(), {40, 41, 42, 43, 44});
  ASSERT_TRUE(core->Add(1, Req(p, 40), std::make_shared<RequestStream>(1)).ok());
  for (int i = 0; i < 500 && !core->idle(); ++i) core->Step();
  const SpecCounts capped = core->metrics().SpecTotal();
  ASSERT_GT(capped.drafts, 0);
  EXPECT_EQ(capped.draft_tokens, capped.drafts);  // one draft token per verification
  k.speculation = false;
  core->SetKnobs(k);
  ASSERT_TRUE(core->Add(2, Req(p, 40), std::make_shared<RequestStream>(2)).ok());
  for (int i = 0; i < 500 && !core->idle(); ++i) core->Step();
  EXPECT_EQ(core->metrics().SpecTotal().drafts, capped.drafts);  // none while off
}

// A follower of the engine's events: the set of cached block hashes with their parents.
struct Follower {
  std::map<uint64_t, std::optional<uint64_t>> blocks;
  int64_t orphans = 0, unknown = 0, stored = 0, removed = 0, cleared = 0;
  void Apply(const std::vector<prefix::BlockEvent>& events) {
    for (const prefix::BlockEvent& e : events) {
      if (e.kind == prefix::BlockEvent::Kind::kCleared) {
        blocks.clear();
        ++cleared;
      } else if (e.kind == prefix::BlockEvent::Kind::kStored) {
        if (e.parent && !blocks.count(*e.parent)) ++orphans;
        blocks[e.hash] = e.parent;
        ++stored;
      } else {
        if (!blocks.erase(e.hash)) ++unknown;
        ++removed;
      }
    }
  }
  std::vector<uint64_t> Hashes() const {
    std::vector<uint64_t> h;
    for (const auto& [k, p] : blocks) h.push_back(k);
    return h;
  }
};

// A randomized workload (shared prefixes across three namespaces, a small pool that evicts,
// cancellations, preemption): after every step the replayed events name exactly the blocks the
// prefix cache holds, and every announced parent was announced before its child.
TEST(EngineEventsTest, ReplayingTheEventStreamReconstructsTheCachedBlocks) {
  Loaded& m = Get(testing::kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 40;
  cfg.sched.block_size = 8;
  cfg.sched.max_batched_tokens = 48;
  cfg.sched.max_running = 6;
  cfg.event_capacity = 1 << 16;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  Follower f;
  f.Apply(core->DrainEvents());
  EXPECT_EQ(f.cleared, 1);  // the stream starts with "all cleared"
  std::mt19937_64 rng(11);
  std::vector<std::vector<int32_t>> stems;
  for (int i = 0; i < 4; ++i) stems.push_back(Ids(24 + 8 * i, 500 * i));
  std::map<int64_t, std::shared_ptr<RequestStream>> live;
  int64_t next = 0, cancelled = 0;
  for (int step = 0; step < 800; ++step) {
    if (next < 120 && rng() % 2 == 0) {
      std::vector<int32_t> p = stems[rng() % stems.size()];
      p.resize(8 + rng() % p.size());
      const std::vector<int32_t> tail = Ids(static_cast<int32_t>(rng() % 12), static_cast<int32_t>(rng() % 997));
      p.insert(p.end(), tail.begin(), tail.end());
      auto s = std::make_shared<RequestStream>(next);
      ASSERT_TRUE(core->Add(next, Req(p, 1 + static_cast<int32_t>(rng() % 20), 0.0f, rng() % 3), s).ok());
      live[next++] = s;
    }
    if (rng() % 9 == 0 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      core->Cancel(it->first);
      live.erase(it);
      ++cancelled;
    }
    core->Step();
    for (auto it = live.begin(); it != live.end();) {
      it = it->second->done() ? live.erase(it) : std::next(it);
    }
    f.Apply(core->DrainEvents());
    std::vector<uint64_t> cached = core->CachedBlockHashes();
    std::sort(cached.begin(), cached.end());
    ASSERT_EQ(f.Hashes(), cached) << "step " << step;
  }
  EXPECT_EQ(f.orphans, 0);
  EXPECT_EQ(f.unknown, 0);
  EXPECT_GT(f.stored, 100);
  EXPECT_GT(f.removed, 50);  // eviction happened
  EXPECT_GT(cancelled, 10);
  EXPECT_EQ(core->Stats().events_dropped, 0);
  for (const auto& [h, parent] : f.blocks) {
    if (parent) {
      EXPECT_TRUE(f.blocks.count(*parent)) << "orphan parent of " << h;
    }
  }
}

TEST(EngineEventsTest, AFullEventQueueDropsAndCounts) {
  Loaded& m = Get(testing::kWp1m);
  EngineConfig cfg;
  cfg.kv.blocks = 64;
  cfg.event_capacity = 3;
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  ASSERT_TRUE(core->Add(1, Req(Ids(100, 3), 2), std::make_shared<RequestStream>(1)).ok());
  for (int i = 0; i < 100 && !core->idle(); ++i) core->Step();
  EXPECT_EQ(core->DrainEvents().size(), 3u);
  EXPECT_GT(core->Stats().events_dropped, 0);
}

// The bucket a request is measured under is computed once, from the one definition, and the
// speculation policy's counts, the request histograms and the request's own metrics agree.
TEST(EngineBucketsTest, OneBucketForPolicyMetricsAndRequest) {
  Loaded& m = Get(testing::kWp11m);
  EngineConfig cfg;
  cfg.kv.blocks = 256;
  cfg.spec.mode = SpecMode::kAuto;  // n-gram proposer, the policy decides per bucket
  cfg.model_name = "wp";
  auto core = std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
  metrics::Registry& reg = *core->config().metrics;
  std::vector<int32_t> rep;
  for (int i = 0; i < 10; ++i) rep.insert(rep.end(), {50, 51, 52, 53});
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r = Req(rep, 30 + 100 * (i % 2), i % 3 == 0 ? 0.0f : 0.9f);
    r.task = i % 2 ? "qa" : "creative";
    r.sla = "gold";
    reqs.push_back(r);
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < reqs.size(); ++i) {
    streams.push_back(std::make_shared<RequestStream>(static_cast<int64_t>(i)));
    ASSERT_TRUE(core->Add(static_cast<int64_t>(i), reqs[i], streams.back()).ok());
  }
  for (int i = 0; i < 2000 && !core->idle(); ++i) core->Step();
  std::set<metrics::BucketId> seen;
  const metrics::FamilySnapshot ttft = reg.Collect("tarmac:time_to_first_token_seconds", 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    TokenEvent ev;
    while (streams[i]->TryNext(&ev) && !ev.last()) {
    }
    ASSERT_TRUE(ev.last());
    const metrics::BucketId b = ev.metrics.bucket;
    EXPECT_EQ(b, reg.buckets().Of(BucketFeatures(reqs[i]))) << i;
    EXPECT_EQ(reg.buckets().Get(b).task, reqs[i].task);
    seen.insert(b);
    metrics::LabelValues labels = {"wp"};
    for (const std::string& v : reg.buckets().LabelValues(b)) labels.push_back(v);
    const metrics::SeriesSnapshot* s = ttft.Find(labels);
    ASSERT_NE(s, nullptr) << reg.buckets().Key(b);
    EXPECT_GE(s->histogram.count, 1u);
  }
  // The policy decided per bucket under exactly the request buckets.
  std::set<metrics::BucketId> spec_buckets;
  for (const auto& [b, c] : core->metrics().SpecByBucket()) {
    spec_buckets.insert(b);
    EXPECT_GT(c.decisions, 0);
  }
  EXPECT_EQ(spec_buckets, seen);
  EXPECT_GE(seen.size(), 3u);
}

}  // namespace
}  // namespace tarmac::engine
