// Scheduler::ReleaseOutsideWindow: a sliding-window model's requests give back the KV blocks
// no later query reads, and everything else (integrity, prefix cache, preemption, finish)
// keeps working with the freed entries in their tables.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tarmac::sched {
namespace {

constexpr int32_t kBs = 4;

struct Fixture {
  Fixture(int32_t blocks, bool prefix)
      : pool(blocks), tree(&pool, kBs), sched(Config(), &pool, prefix ? &tree : nullptr) {}
  static SchedulerConfig Config() {
    SchedulerConfig c;
    c.block_size = kBs;
    c.max_batched_tokens = 64;
    c.max_running = 8;
    c.max_context = 256;
    return c;
  }
  kv::BlockPool pool;
  prefix::RadixTree tree;
  Scheduler sched;
};

std::vector<int32_t> Seq(int32_t n, int32_t base = 0) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = base + i;
  return v;
}

// One engine step with the window release after the commit, as engine_core does it.
SchedulerOutput Step(Scheduler& s, int32_t window, int32_t* released = nullptr) {
  SchedulerOutput out = s.Schedule();
  s.Commit(out);
  int32_t n = 0;
  for (const ScheduledSeq& q : out.seqs) n += s.ReleaseOutsideWindow(q.id, window);
  for (const ScheduledSeq& q : out.seqs)
    if (q.sample) s.AppendToken(q.id, 7);
  EXPECT_TRUE(s.CheckIntegrity().ok()) << s.CheckIntegrity().message();
  if (released != nullptr) *released = n;
  return out;
}

int32_t Live(const std::vector<int32_t>& table) {
  return static_cast<int32_t>(
      std::count_if(table.begin(), table.end(), [](int32_t b) { return b != Scheduler::kFreedBlock; }));
}

// A 20-token prompt and 40 decodes with a window of 6: after the prefill the first 3 blocks
// (positions 0-11, all before 20 - 6 + 1 = 15) come back; from then on the request holds at
// most ceil(6 / 4) + 1 blocks, the rest of the pool stays free, and every freed entry is
// a leading one.
TEST(SchedulerWindowTest, ReleasesBlocksBeforeTheWindow) {
  Fixture f(32, /*prefix=*/false);
  ASSERT_TRUE(f.sched.Add({1, 0, 0, Seq(20), 40}).ok());
  int32_t released = 0;
  SchedulerOutput out = Step(f.sched, 6, &released);
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(released, 3);
  EXPECT_EQ(f.pool.num_free(), 32 - 2);
  int32_t total_released = released;
  for (int step = 0; step < 39; ++step) {
    out = Step(f.sched, 6, &released);
    total_released += released;
    const std::vector<int32_t>& table = *out.seqs[0].block_table;
    const int32_t computed = out.seqs[0].start + out.seqs[0].num_tokens;
    EXPECT_LE(Live(table), (6 + kBs - 1) / kBs + 1) << "step " << step;
    EXPECT_EQ(f.pool.num_free(), 32 - Live(table));
    // Freed: exactly the blocks wholly before computed - 6 + 1.
    const int32_t want_freed = std::max(computed - 6 + 1, 0) / kBs;
    for (int32_t i = 0; i < static_cast<int32_t>(table.size()); ++i)
      EXPECT_EQ(table[i] == Scheduler::kFreedBlock, i < want_freed) << "step " << step << " entry " << i;
  }
  EXPECT_EQ(total_released, (60 - 6 + 1) / kBs);
  const KvUsage u = f.sched.Usage();
  EXPECT_EQ(u.request_blocks + u.free_blocks, 32);
  f.sched.Finish(1);
  EXPECT_EQ(f.pool.num_free(), 32);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok());
}

// With the prefix cache: the blocks the request had cached stay cached (unlocked, so
// evictable) rather than free; it caches nothing after; a later request with the same
// prompt still reuses what is cached; finishing returns the request's own blocks.
TEST(SchedulerWindowTest, CachedPrefixStaysEvictable) {
  Fixture f(32, /*prefix=*/true);
  ASSERT_TRUE(f.sched.Add({1, 9, 0, Seq(20), 30}).ok());
  Step(f.sched, 6);  // prefill: 5 full blocks cached, 3 of them before the window
  KvUsage u = f.sched.Usage();
  EXPECT_EQ(u.request_blocks, 2);
  EXPECT_EQ(u.cached_only_blocks, 3);
  for (int i = 0; i < 20; ++i) Step(f.sched, 6);
  u = f.sched.Usage();
  EXPECT_EQ(u.cached_only_blocks, 3 + 2) << "the prefill's other 2 cached blocks fell out too";
  EXPECT_EQ(static_cast<int32_t>(f.tree.CachedBlocks().size()), 5) << "no blocks cached after";
  ASSERT_TRUE(f.sched.Add({2, 9, 0, Seq(20), 2}).ok());
  SchedulerOutput out = f.sched.Schedule();
  for (const ScheduledSeq& q : out.seqs) {
    if (q.id == 2) {  // 4 cached blocks reused (never the last token)
      EXPECT_EQ(q.start, 16);
    }
  }
  f.sched.Commit(out);
  f.sched.Finish(1);
  f.sched.Finish(2);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok());
  // Cached blocks are all evictable: nothing locked them.
  EXPECT_EQ(f.pool.num_free() + static_cast<int32_t>(f.tree.CachedBlocks().size()), 32);
}

// A request with freed entries is preempted (the pool runs dry) and recomputes from scratch
// with a full table again; unknown and waiting requests release nothing.
TEST(SchedulerWindowTest, PreemptionAndOtherStates) {
  Fixture f(10, /*prefix=*/false);
  EXPECT_EQ(f.sched.ReleaseOutsideWindow(5, 6), 0);
  ASSERT_TRUE(f.sched.Add({1, 0, 1, Seq(20), 16}).ok());
  EXPECT_EQ(f.sched.ReleaseOutsideWindow(1, 6), 0);  // waiting: holds nothing
  Step(f.sched, 6);
  ASSERT_TRUE(f.sched.Add({2, 0, 0, Seq(32), 4}).ok());  // more important, needs 9 blocks
  SchedulerOutput out = f.sched.Schedule();
  ASSERT_EQ(out.preempted, std::vector<int64_t>{1});
  EXPECT_EQ(f.sched.state(1), RequestState::kPreempted);
  EXPECT_TRUE(f.sched.CheckIntegrity().ok()) << f.sched.CheckIntegrity().message();
  f.sched.Commit(out);
  f.sched.Finish(2);
  out = f.sched.Schedule();  // 1 comes back and recomputes its 21 tokens
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].start, 0);
  EXPECT_EQ(Live(*out.seqs[0].block_table), 6);
  f.sched.Commit(out);
  EXPECT_EQ(f.sched.ReleaseOutsideWindow(1, 6), 4);  // positions 0-15 before 21 - 6 + 1
  EXPECT_TRUE(f.sched.CheckIntegrity().ok());
  f.sched.Finish(1);
  EXPECT_EQ(f.pool.num_free(), 10);
}

}  // namespace
}  // namespace tarmac::sched
