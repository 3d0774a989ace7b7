#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace tarmac::sched {
namespace {

constexpr int32_t kBs = 4;

struct Fixture {
  Fixture(int32_t blocks, SchedulerConfig cfg, bool prefix = true)
      : pool(blocks), tree(&pool, cfg.block_size), sched(cfg, &pool, prefix ? &tree : nullptr) {}
  kv::BlockPool pool;
  prefix::RadixTree tree;
  Scheduler sched;
};

SchedulerConfig Cfg(int32_t budget = 64, int32_t max_running = 8, int32_t ctx = 256) {
  SchedulerConfig c;
  c.block_size = kBs;
  c.max_batched_tokens = budget;
  c.max_running = max_running;
  c.max_context = ctx;
  return c;
}

std::vector<int32_t> Seq(int32_t n, int32_t base = 0) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = base + i;
  return v;
}

double g_now = 0;  // the fake clock session TTLs run on
double FakeNow() { return g_now; }

// Runs one step as an engine would: commit, then append a token to every sampling request.
SchedulerOutput Step(Scheduler& s, int32_t token = 7) {
  SchedulerOutput out = s.Schedule();
  s.Commit(out);
  for (const ScheduledSeq& q : out.seqs)
    if (q.sample) s.AppendToken(q.id, token);
  EXPECT_TRUE(s.CheckIntegrity().ok()) << s.CheckIntegrity().message();
  return out;
}

TEST(SchedulerTest, AdmissionRejectsWhatCanNeverFit) {
  Fixture f(8, Cfg(64, 8, 40));
  Status st = f.sched.Add({1, 0, 0, Seq(30), 20});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exceeds the context of 40"), std::string::npos) << st.message();
  st = f.sched.Add({2, 0, 0, Seq(30), 5});  // 35 tokens = 9 blocks > 8
  EXPECT_NE(st.message().find("needs 9 KV blocks but the whole cache has 8"), std::string::npos)
      << st.message();
  EXPECT_FALSE(f.sched.Add({3, 0, 0, {}, 5}).ok());
  ASSERT_TRUE(f.sched.Add({4, 0, 0, Seq(10), 5}).ok());
  EXPECT_FALSE(f.sched.Add({4, 0, 0, Seq(10), 5}).ok());  // duplicate id
  EXPECT_TRUE(f.sched.CheckIntegrity().ok());
}

TEST(SchedulerTest, ChunkedPrefillKeepsDecodesFlowing) {
  Fixture f(64, Cfg(/*budget=*/8));
  ASSERT_TRUE(f.sched.Add({1, 0, 0, Seq(3), 10}).ok());
  SchedulerOutput o = Step(f.sched);
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_TRUE(o.seqs[0].sample);
  ASSERT_TRUE(f.sched.Add({2, 0, 0, Seq(20, 100), 10}).ok());
  // Request 1 decodes one token per step; request 2's prompt arrives in chunks of 7.
  int32_t prefilled = 0;
  for (int step = 0; step < 3; ++step) {
    o = Step(f.sched);
    ASSERT_EQ(o.seqs.size(), 2u);
    EXPECT_EQ(o.seqs[0].id, 1);
    EXPECT_EQ(o.seqs[0].num_tokens, 1);
    EXPECT_EQ(o.seqs[1].id, 2);
    EXPECT_EQ(o.seqs[1].start, prefilled);
    prefilled += o.seqs[1].num_tokens;
    EXPECT_LE(o.num_tokens, 8);
    EXPECT_EQ(o.seqs[1].sample, prefilled == 20);
  }
  EXPECT_EQ(prefilled, 20);
}

TEST(SchedulerTest, PrefixHitSkipsCachedBlocksButNeverTheLastToken) {
  Fixture f(64, Cfg());
  ASSERT_TRUE(f.sched.Add({1, 42, 0, Seq(12), 1}).ok());
  SchedulerOutput o = Step(f.sched);
  ASSERT_EQ(o.seqs[0].num_tokens, 12);
  f.sched.Finish(1);
  EXPECT_EQ(f.tree.num_nodes(), 3);  // 12 computed tokens = 3 full blocks
  // Same prompt: 3 blocks cached but the last token must be computed, so only 2 are reused.
  ASSERT_TRUE(f.sched.Add({2, 42, 0, Seq(12), 1}).ok());
  o = Step(f.sched);
  EXPECT_EQ(o.seqs[0].start, 8);
  EXPECT_EQ(o.seqs[0].num_tokens, 4);
  // Longer prompt with the same start reuses all three.
  auto longer = Seq(12);
  longer.push_back(500);
  ASSERT_TRUE(f.sched.Add({3, 42, 0, longer, 1}).ok());
  o = Step(f.sched);
  ASSERT_EQ(o.seqs.size(), 2u);  // request 2 decodes, request 3 prefills
  EXPECT_EQ(o.seqs[1].id, 3);
  EXPECT_EQ(o.seqs[1].start, 12);
  EXPECT_EQ(f.sched.counters().prefix_hit_tokens, 8 + 12);
}

TEST(SchedulerTest, NoHitAcrossNamespaces) {
  Fixture f(64, Cfg());
  ASSERT_TRUE(f.sched.Add({1, /*ns=*/1, 0, Seq(17), 1}).ok());
  Step(f.sched);
  f.sched.Finish(1);
  ASSERT_TRUE(f.sched.Add({2, /*ns=*/2, 0, Seq(17), 1}).ok());
  SchedulerOutput o = Step(f.sched);
  EXPECT_EQ(o.seqs[0].start, 0);
  EXPECT_EQ(f.sched.counters().prefix_hit_tokens, 0);
  f.sched.Finish(2);
  ASSERT_TRUE(f.sched.Add({3, /*ns=*/1, 0, Seq(17), 1}).ok());
  o = Step(f.sched);
  EXPECT_EQ(o.seqs[0].start, 16);
}

TEST(SchedulerTest, PrefixSharedByConcurrentRequestsOnceComputed) {
  Fixture f(64, Cfg(/*budget=*/16));
  ASSERT_TRUE(f.sched.Add({1, 0, 0, Seq(33), 4}).ok());
  Step(f.sched);
  Step(f.sched);  // 32 of 33 computed: 8 full blocks cached while request 1 still runs
  ASSERT_TRUE(f.sched.Add({2, 0, 0, Seq(33), 4}).ok());
  SchedulerOutput o = Step(f.sched);
  ASSERT_EQ(o.seqs.size(), 2u);
  EXPECT_EQ(o.seqs[1].id, 2);
  EXPECT_EQ(o.seqs[1].start, 32);
}

TEST(SchedulerTest, OutOfBlocksEvictsCacheThenPreemptsLeastImportant) {
  // 10 blocks of 4 tokens; two requests of 16-token prompts growing to 32 tokens each.
  Fixture f(10, Cfg(64, 8, 64));
  ASSERT_TRUE(f.sched.Add({1, 0, /*priority=*/0, Seq(16), 16}).ok());
  ASSERT_TRUE(f.sched.Add({2, 0, /*priority=*/1, Seq(16, 50), 16}).ok());
  int64_t preempted_id = -1;
  for (int step = 0; step < 40 && f.sched.Has(1); ++step) {
    SchedulerOutput o = Step(f.sched);
    for (int64_t id : o.preempted) preempted_id = id;
    if (f.sched.Has(1) && f.sched.num_output(1) >= 16) f.sched.Finish(1);
  }
  EXPECT_FALSE(f.sched.Has(1));
  EXPECT_EQ(preempted_id, 2);  // the larger class gives way
  EXPECT_GE(f.sched.counters().preemptions, 1);
  // Request 2 resumes and reuses what it had cached.
  for (int step = 0; step < 40 && f.sched.num_output(2) < 16; ++step) Step(f.sched);
  EXPECT_EQ(f.sched.num_output(2), 16);
}

TEST(SchedulerTest, HigherClassDisplacesLowerWhenRunningCapIsHit) {
  Fixture f(64, Cfg(64, /*max_running=*/1));
  ASSERT_TRUE(f.sched.Add({1, 0, /*priority=*/5, Seq(4), 10}).ok());
  Step(f.sched);
  ASSERT_TRUE(f.sched.Add({2, 0, /*priority=*/0, Seq(4, 9), 10}).ok());
  ASSERT_TRUE(f.sched.Add({3, 0, /*priority=*/5, Seq(4, 19), 10}).ok());
  SchedulerOutput o = Step(f.sched);
  EXPECT_EQ(f.sched.state(1), RequestState::kPreempted);
  EXPECT_EQ(f.sched.state(2), RequestState::kRunning);
  EXPECT_EQ(f.sched.state(3), RequestState::kWaiting);  // same class as running: waits
  ASSERT_EQ(o.preempted.size(), 1u);
}

TEST(SchedulerTest, CancelReturnsEveryBlock) {
  Fixture f(32, Cfg(8), /*prefix=*/false);
  ASSERT_TRUE(f.sched.Add({1, 0, 0, Seq(20), 10}).ok());
  ASSERT_TRUE(f.sched.Add({2, 0, 0, Seq(20), 10}).ok());
  Step(f.sched);
  Step(f.sched);
  f.sched.Finish(1);
  f.sched.Finish(2);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok());
  EXPECT_EQ(f.pool.num_free(), 32);
}

// Random arrivals, cancellations and a tiny pool that forces eviction and preemption, across
// several namespaces; integrity after every step; everything returns at the end.
TEST(SchedulerTest, RandomisedWorkloadKeepsIntegrity) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::mt19937_64 rng(seed);
    SchedulerConfig cfg = Cfg(/*budget=*/12 + static_cast<int32_t>(seed % 3) * 10,
                              /*max_running=*/4 + static_cast<int32_t>(seed % 4), /*ctx=*/64);
    Fixture f(/*blocks=*/20, cfg, /*prefix=*/seed % 3 != 0);
    f.sched.SetClockForTesting(&FakeNow);
    std::map<int64_t, int32_t> max_tokens;
    int64_t next_id = 0, finished = 0;
    for (int step = 0; step < 400; ++step) {
      if (rng() % 3 == 0 && next_id < 120) {
        const int32_t ns = static_cast<int32_t>(rng() % 3);
        const int32_t len = 1 + static_cast<int32_t>(rng() % 30);
        std::vector<int32_t> prompt = Seq(len, static_cast<int32_t>(rng() % 2) * 1000);
        const int32_t mt = 1 + static_cast<int32_t>(rng() % 20);
        // Some requests belong to one of a few sessions (pins that outlive them).
        prefix::SessionRetain session;
        if (rng() % 3 == 0) session = {1 + rng() % 4, 1.0 + static_cast<double>(rng() % 40), 2 + static_cast<int64_t>(rng() % 6)};
        ASSERT_TRUE(f.sched.Add({next_id, static_cast<uint64_t>(ns),
                                 static_cast<int32_t>(rng() % 3), prompt, mt, session}).ok());
        max_tokens[next_id++] = mt;
      }
      if (rng() % 10 == 0 && !max_tokens.empty()) {  // cancel a random live request
        auto it = max_tokens.begin();
        std::advance(it, rng() % max_tokens.size());
        f.sched.Finish(it->first);
        max_tokens.erase(it);
      }
      if (rng() % 25 == 0) {  // knobs change between steps
        f.sched.SetLimits(4 + static_cast<int32_t>(rng() % 30), 1 + static_cast<int32_t>(rng() % 8));
        f.sched.SetAdmitPriorityLimit(rng() % 2 ? INT32_MAX : static_cast<int32_t>(rng() % 3));
      }
      g_now += 0.5;  // session TTLs run out along the way
      SchedulerOutput o = Step(f.sched, static_cast<int32_t>(rng() % 50));
      for (const ScheduledSeq& q : o.seqs) {
        if (q.sample && f.sched.num_output(q.id) >= max_tokens[q.id]) {
          f.sched.Finish(q.id);
          max_tokens.erase(q.id);
          ++finished;
        }
      }
      ASSERT_TRUE(f.sched.CheckIntegrity().ok()) << f.sched.CheckIntegrity().message();
    }
    for (auto& [id, mt] : max_tokens) f.sched.Finish(id);
    ASSERT_TRUE(f.sched.CheckIntegrity().ok());
    EXPECT_GT(finished, 20) << "seed " << seed;
    const KvUsage u = f.sched.Usage();
    if (seed % 3 != 0) {
      EXPECT_GT(f.sched.counters().sessions_expired + f.sched.counters().sessions_released, 0);
    }
    EXPECT_EQ(u.request_blocks, 0);
    EXPECT_EQ(u.free_blocks + u.cached_only_blocks, u.total_blocks);
    EXPECT_GT(f.sched.counters().preemptions + f.sched.counters().evicted_blocks, 0);
  }
}

TEST(SchedulerTest, KnobsApplyFromTheNextStep) {
  Fixture f(64, Cfg(/*budget=*/64, /*max_running=*/4));
  for (int64_t id = 1; id <= 4; ++id) ASSERT_TRUE(f.sched.Add({id, 0, 0, Seq(8, 100 * static_cast<int32_t>(id)), 8}).ok());
  SchedulerOutput o = Step(f.sched);
  EXPECT_EQ(o.seqs.size(), 4u);
  EXPECT_EQ(o.num_tokens, 32);
  // A smaller budget and running cap: the next step holds to them; nobody is preempted.
  f.sched.SetLimits(/*max_batched_tokens=*/3, /*max_running=*/2);
  ASSERT_TRUE(f.sched.Add({5, 0, 0, Seq(8, 900), 8}).ok());
  o = Step(f.sched);
  EXPECT_EQ(o.num_tokens, 3);
  EXPECT_TRUE(o.preempted.empty());
  EXPECT_EQ(f.sched.num_running(), 4);  // above the new cap until requests leave
  EXPECT_EQ(f.sched.state(5), RequestState::kWaiting);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok()) << f.sched.CheckIntegrity().message();
  f.sched.Finish(1);
  f.sched.Finish(2);
  f.sched.Finish(3);
  f.sched.SetLimits(64, 2);
  Step(f.sched);
  EXPECT_EQ(f.sched.state(5), RequestState::kRunning);
  EXPECT_EQ(f.sched.num_running(), 2);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok()) << f.sched.CheckIntegrity().message();
}

TEST(SchedulerTest, AdmitPriorityLimitHoldsBackLessImportantClasses) {
  Fixture f(64, Cfg());
  f.sched.SetAdmitPriorityLimit(0);
  ASSERT_TRUE(f.sched.Add({1, 0, /*priority=*/1, Seq(4), 4}).ok());
  ASSERT_TRUE(f.sched.Add({2, 0, /*priority=*/0, Seq(4, 50), 4}).ok());
  ASSERT_TRUE(f.sched.Add({3, 0, /*priority=*/-1, Seq(4, 90), 4}).ok());
  Step(f.sched);
  EXPECT_EQ(f.sched.state(1), RequestState::kWaiting);
  EXPECT_EQ(f.sched.state(2), RequestState::kRunning);
  EXPECT_EQ(f.sched.state(3), RequestState::kRunning);
  f.sched.SetAdmitPriorityLimit(INT32_MAX);
  Step(f.sched);
  EXPECT_EQ(f.sched.state(1), RequestState::kRunning);
}

TEST(SchedulerTest, UsageIsKeptWithoutWalkingTheCache) {
  Fixture f(32, Cfg());
  ASSERT_TRUE(f.sched.Add({1, 0, 0, Seq(10), 8}).ok());  // 3 blocks for 10 tokens: 2 slack
  Step(f.sched);
  KvUsage u = f.sched.Usage();
  EXPECT_EQ(u.request_blocks, 3);
  EXPECT_EQ(u.allocated_slots, 12);
  EXPECT_EQ(u.unused_slots, 2);  // 12 slots, 10 computed (the sampled 11th is not yet)
  f.sched.Finish(1);
  u = f.sched.Usage();
  EXPECT_EQ(u.request_blocks, 0);
  EXPECT_EQ(u.cached_only_blocks, 2);  // its two full blocks stay cached
  EXPECT_EQ(u.free_blocks, 30);
  EXPECT_EQ(u.unused_slots, 0);
}

TEST(SchedulerTest, EvictCachedBeyondLeavesAtMostTheLimit) {
  Fixture f(32, Cfg());
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(f.sched.Add({id, 0, 0, Seq(12, 100 * static_cast<int32_t>(id)), 2}).ok());
  Step(f.sched);
  for (int64_t id = 1; id <= 3; ++id) f.sched.Finish(id);
  ASSERT_EQ(f.sched.Usage().cached_only_blocks, 9);  // three full blocks each stay cached
  EXPECT_EQ(f.sched.EvictCachedBeyond(9), 0);
  EXPECT_EQ(f.sched.EvictCachedBeyond(4), 5);
  EXPECT_EQ(f.sched.Usage().cached_only_blocks, 4);
  EXPECT_EQ(f.sched.counters().evicted_blocks, 5);
  EXPECT_EQ(f.sched.EvictCachedBeyond(0), 4);
  EXPECT_EQ(f.sched.Usage().free_blocks, 32);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok()) << f.sched.CheckIntegrity().message();
  // Without a prefix cache there is nothing to evict.
  Fixture g(8, Cfg(), /*prefix=*/false);
  EXPECT_EQ(g.sched.EvictCachedBeyond(0), 0);
}

TEST(SchedulerTest, PreemptAboveTakesBackLessImportantRequestsOnly) {
  Fixture f(64, Cfg());
  ASSERT_TRUE(f.sched.Add({1, 0, /*priority=*/-1, Seq(8), 8}).ok());
  ASSERT_TRUE(f.sched.Add({2, 0, /*priority=*/1, Seq(8, 50), 8}).ok());
  ASSERT_TRUE(f.sched.Add({3, 0, /*priority=*/2, Seq(8, 90), 8}).ok());
  ASSERT_TRUE(f.sched.Add({4, 0, /*priority=*/0, Seq(8, 130), 8}).ok());
  Step(f.sched);
  ASSERT_EQ(f.sched.num_running(), 4);
  const std::vector<int64_t> ids = f.sched.PreemptAbove(0);
  EXPECT_EQ(ids, (std::vector<int64_t>{3, 2}));  // least important first
  EXPECT_EQ(f.sched.state(2), RequestState::kPreempted);
  EXPECT_EQ(f.sched.state(3), RequestState::kPreempted);
  EXPECT_EQ(f.sched.state(1), RequestState::kRunning);
  EXPECT_EQ(f.sched.state(4), RequestState::kRunning);
  EXPECT_EQ(f.sched.counters().preemptions, 2);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok()) << f.sched.CheckIntegrity().message();
  EXPECT_TRUE(f.sched.PreemptAbove(0).empty());
  // Held back by the admission limit, they wait; lifted, they run again (recompute).
  f.sched.SetAdmitPriorityLimit(0);
  Step(f.sched);
  EXPECT_EQ(f.sched.state(2), RequestState::kPreempted);
  f.sched.SetAdmitPriorityLimit(INT32_MAX);
  Step(f.sched);
  EXPECT_EQ(f.sched.state(2), RequestState::kRunning);
  EXPECT_EQ(f.sched.state(3), RequestState::kRunning);
}

}  // namespace
}  // namespace tarmac::sched

namespace tarmac::sched {
namespace {

// Runs request id (prompt, one output token) to the end.
void RunOne(Fixture& f, int64_t id, uint64_t ns, std::vector<int32_t> prompt, prefix::SessionRetain session = {}) {
  ASSERT_TRUE(f.sched.Add({id, ns, 0, std::move(prompt), 1, session}).ok());
  while (f.sched.num_output(id) < 1) Step(f.sched);
  f.sched.Finish(id);
  ASSERT_TRUE(f.sched.CheckIntegrity().ok()) << f.sched.CheckIntegrity().message();
}

// Two turns of a conversation with other traffic between them: the second turn's prompt
// starts with the first turn's 12 tokens.
int32_t SecondTurnHit(bool session) {
  Fixture f(12, Cfg());
  f.sched.SetClockForTesting(&FakeNow);
  const prefix::SessionRetain s = session ? prefix::SessionRetain{99, 100, 10} : prefix::SessionRetain{};
  RunOne(f, 1, 5, Seq(12), s);
  for (int k = 0; k < 5; ++k) RunOne(f, 10 + k, 6, Seq(16, 1000 + 100 * k));  // fills the cache
  std::vector<int32_t> next = Seq(12);
  next.insert(next.end(), {7, 50, 51, 52});
  EXPECT_TRUE(f.sched.Add({2, 5, 0, next, 1, s}).ok());
  Step(f.sched);
  return f.sched.prefix_hit_tokens(2);
}

TEST(SchedulerSessions, ASessionsPrefixSurvivesOtherTraffic) {
  EXPECT_EQ(SecondTurnHit(false), 0);   // evicted by the other traffic
  EXPECT_EQ(SecondTurnHit(true), 12);  // pinned: the history is not prefilled again
}

TEST(SchedulerSessions, PinsExpireAfterTheirTtl) {
  Fixture f(32, Cfg());
  f.sched.SetClockForTesting(&FakeNow);
  g_now = 0;
  RunOne(f, 1, 5, Seq(12), {99, 10, 10});
  EXPECT_EQ(f.sched.num_sessions(), 1u);
  EXPECT_EQ(f.sched.session_blocks(5), 3);
  g_now = 9;
  Step(f.sched);
  EXPECT_EQ(f.sched.num_sessions(), 1u);
  g_now = 10.5;
  Step(f.sched);
  EXPECT_EQ(f.sched.num_sessions(), 0u);
  EXPECT_EQ(f.sched.counters().sessions_expired, 1);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok());
}

TEST(SchedulerSessions, ANamespacesBudgetReleasesItsOldestSessions) {
  Fixture f(32, Cfg());
  f.sched.SetClockForTesting(&FakeNow);
  RunOne(f, 1, 5, Seq(12), {1, 100, 4});
  RunOne(f, 2, 7, Seq(12, 300), {3, 100, 4});      // another namespace: its own budget
  RunOne(f, 3, 5, Seq(12, 500), {2, 100, 4});      // 3 + 3 > 4: session 1 goes
  EXPECT_EQ(f.sched.num_sessions(), 2u);
  EXPECT_EQ(f.sched.session_blocks(5), 3);
  EXPECT_EQ(f.sched.session_blocks(7), 3);
  RunOne(f, 4, 5, Seq(12, 500), {2, 100, 4});      // the same session again: replaces its pin
  EXPECT_EQ(f.sched.session_blocks(5), 3);
  RunOne(f, 5, 5, Seq(24, 700), {4, 100, 4});      // alone over the budget: not kept, nobody released
  EXPECT_EQ(f.sched.session_blocks(5), 3);
  EXPECT_EQ(f.sched.num_sessions(), 2u);
}

TEST(SchedulerSessions, PinsAreReleasedBeforeAnyRequestIsPreempted) {
  Fixture f(8, Cfg(64, 8, 64));
  f.sched.SetClockForTesting(&FakeNow);
  RunOne(f, 1, 5, Seq(12), {99, 100, 8});
  ASSERT_EQ(f.sched.session_blocks(5), 3);
  // 28 + 4 tokens need all 8 blocks.
  ASSERT_TRUE(f.sched.Add({2, 6, 0, Seq(28, 100), 4}).ok());
  SchedulerOutput o = Step(f.sched);
  ASSERT_EQ(o.seqs.size(), 1u);
  EXPECT_EQ(o.seqs[0].num_tokens, 28);
  while (f.sched.num_output(2) < 4) ASSERT_FALSE(Step(f.sched).empty());
  EXPECT_EQ(f.sched.num_sessions(), 0u);
  EXPECT_EQ(f.sched.counters().sessions_released, 1);
  EXPECT_EQ(f.sched.counters().preemptions, 0);
}

}  // namespace
}  // namespace tarmac::sched
