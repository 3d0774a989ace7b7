// The KV-event publisher over real ZeroMQ sockets on loopback, fed by a real engine (wp-1m):
// a follower that rebuilds the block set from the events holds exactly the engine's cached
// blocks after a randomized workload with eviction pressure and cancellations (Jaccard 1.0, no
// orphan parents); replay returns exactly the missed messages; a follower survives a restarted
// publisher (sequence 0 again, AllBlocksCleared first); dropped events resynchronise the stream.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include "engine/engine_core.h"
#include "engine/engine_test_util.h"
#include "kvevents/block_set.h"
#include "kvevents/follower.h"
#include "kvevents/publisher.h"

namespace tarmac::kvevents {
namespace {

using engine::EngineConfig;
using engine::EngineCore;
using namespace std::chrono_literals;

std::unique_ptr<EngineCore> MakeEngine(int32_t blocks, int32_t event_capacity, Publisher** notify) {
  EngineConfig cfg;
  cfg.kv.blocks = blocks;
  cfg.sched.block_size = 8;
  cfg.sched.max_batched_tokens = 48;
  cfg.sched.max_running = 6;
  cfg.event_capacity = event_capacity;
  cfg.on_events = [notify] {
    if (*notify) (*notify)->Notify();
  };
  testing::LoadedModel& m = testing::CachedModel(testing::kWp1m);
  return std::move(EngineCore::Create(m.model.get(), m.tok.get(), cfg).value());
}

std::unique_ptr<Publisher> MakePublisher(std::string endpoint = "tcp://127.0.0.1:*", size_t replay = 10000) {
  PublisherConfig c;
  c.endpoint = std::move(endpoint);
  c.replay_endpoint = "tcp://127.0.0.1:*";
  c.replay_buffer = replay;
  auto p = Publisher::Create(c, std::make_shared<metrics::Registry>());
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

void AddEngine(Publisher* pub, EngineCore* core) {
  pub->AddSource({"kv@127.0.0.1:8000@wp-1m", 8, [core](size_t max) { return core->DrainEvents(max); }});
}

// An engine and the publisher that drains it (the engine's on_events wakes it).
struct Rig {
  Publisher* notify = nullptr;  // read by the engine's on_events
  std::unique_ptr<EngineCore> core;
  std::unique_ptr<Publisher> pub;
  explicit Rig(int32_t event_capacity = 1 << 16) : core(MakeEngine(40, event_capacity, &notify)) {}
  void Attach(std::unique_ptr<Publisher> p) {
    pub = std::move(p);
    notify = pub.get();
    AddEngine(pub.get(), core.get());
  }
};

// The engine tests' randomized workload: shared stems over three namespaces, eviction
// pressure in a 40-block pool, cancellations.
struct Workload : testing::CacheChurn {
  explicit Workload(EngineCore* c) : CacheChurn(c, 7) {}
};

// Waits until the follower has applied everything published, then compares with the engine.
void ExpectInSync(Follower& f, BlockSet& set, Publisher& pub, EngineCore& core, const std::string& when) {
  pub.Flush();
  ASSERT_GT(pub.published(), 0u);
  auto apply = [&](const Message& m) { set.Apply(m.batch); };
  auto caught_up = f.WaitFor(pub.published() - 1, 10s, apply);
  ASSERT_TRUE(caught_up.ok()) << caught_up.status().message();
  ASSERT_TRUE(*caught_up) << when << ": follower at " << f.last_seq().value_or(0) << " of " << pub.published();
  std::vector<uint64_t> cached = core.CachedBlockHashes();
  std::sort(cached.begin(), cached.end());
  EXPECT_EQ(Jaccard(set.SortedHashes(), cached), 1.0) << when;
  EXPECT_EQ(set.size(), cached.size()) << when;
  EXPECT_TRUE(set.CheckIntegrity().ok()) << when;
}

TEST(KvEventPublisherTest, AFollowerRebuildsExactlyTheEnginesCachedBlocks) {
  Rig rig;
  rig.Attach(MakePublisher());
  EngineCore* core = rig.core.get();
  Publisher* pub = rig.pub.get();
  auto f = Follower::Connect(pub->endpoint(), pub->replay_endpoint());
  ASSERT_TRUE(f.ok()) << f.status().message();
  BlockSet set;
  Workload w(core);
  for (int step = 0; step < 600; ++step) {
    w.Step();
    if (step % 100 == 99) ExpectInSync(**f, set, *pub, *core, "step " + std::to_string(step));
  }
  while (!core->idle()) core->Step();
  ExpectInSync(**f, set, *pub, *core, "idle");
  EXPECT_EQ(set.orphans(), 0);
  EXPECT_EQ(set.unknown_removals(), 0);
  EXPECT_EQ(set.cleared(), 1);  // the stream starts with AllBlocksCleared
  EXPECT_GT(set.stored(), 100);
  EXPECT_GT(set.removed(), 50);  // eviction pressure
  EXPECT_GT(w.cancelled, 10);
  EXPECT_EQ((*f)->lost(), 0);
  EXPECT_EQ(core->Stats().events_dropped, 0);
}

// A follower that left and came back gets exactly what it missed from the replay socket: the
// same bytes an always-connected subscriber saw, no gap, no extra.
TEST(KvEventPublisherTest, ReplayReturnsExactlyTheMissedMessages) {
  Rig rig;
  rig.Attach(MakePublisher());
  EngineCore* core = rig.core.get();
  Publisher* pub = rig.pub.get();
  auto always = Follower::Connect(pub->endpoint(), pub->replay_endpoint());
  ASSERT_TRUE(always.ok());
  std::map<uint64_t, std::string> seen;  // everything, by seq
  auto record = [&](const Message& m) { seen[m.seq] = m.payload; };
  Workload w(core);
  // Flush after each burst: the publisher's thread sends on its own, and a message still on its
  // way when published() is read would be one more than the count says.
  for (int step = 0; step < 100; ++step) w.Step();
  pub->Flush();
  ASSERT_TRUE(*(*always)->WaitFor(pub->published() - 1, 10s, record));
  const uint64_t left_at = pub->published() - 1;  // the last message the leaver saw
  for (int step = 0; step < 150; ++step) w.Step();  // published while it was away
  pub->Flush();
  ASSERT_TRUE(*(*always)->WaitFor(pub->published() - 1, 10s, record));
  const uint64_t back_at = pub->published();
  ASSERT_GT(back_at, left_at + 5);

  auto back = Subscriber::Connect(pub->endpoint(), pub->replay_endpoint());
  ASSERT_TRUE(back.ok());
  auto missed = (*back)->Replay(left_at + 1, 5s);
  ASSERT_TRUE(missed.ok()) << missed.status().message();
  ASSERT_EQ(missed->size(), back_at - left_at - 1);
  for (size_t i = 0; i < missed->size(); ++i) {
    EXPECT_EQ((*missed)[i].seq, left_at + 1 + i);
    EXPECT_EQ((*missed)[i].payload, seen.at(left_at + 1 + i)) << "seq " << left_at + 1 + i;
  }
  // From the start: every message, seq 0 first, and it opens with AllBlocksCleared.
  auto all = (*back)->Replay(0, 5s);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), back_at);
  ASSERT_FALSE(all->front().batch.events.empty());
  EXPECT_EQ(all->front().batch.events.front().kind, WireEvent::Kind::kCleared);
  // Past the end: nothing but the end marker.
  auto none = (*back)->Replay(back_at + 100, 5s);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(KvEventPublisherTest, TheReplayBufferKeepsTheNewestMessages) {
  Rig rig;
  rig.Attach(MakePublisher("tcp://127.0.0.1:*", /*replay=*/5));
  EngineCore* core = rig.core.get();
  Publisher* pub = rig.pub.get();
  Workload w(core);
  for (int step = 0; step < 80; ++step) {
    w.Step();
    std::this_thread::sleep_for(1ms);
  }
  auto sub = Subscriber::Connect(pub->endpoint(), pub->replay_endpoint());
  ASSERT_TRUE(sub.ok());
  pub->Flush();  // everything the engine queued is sent
  const uint64_t n = pub->published();
  ASSERT_GT(n, 5u);
  auto all = (*sub)->Replay(0, 5s);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ(all->front().seq, n - 5);
  EXPECT_EQ(all->back().seq, n - 1);
}

// A publisher that restarts on the same endpoint counts from 0 again and opens with
// AllBlocksCleared; a follower that stayed connected notices and starts over.
TEST(KvEventPublisherTest, AFollowerStartsOverWhenThePublisherRestarts) {
  auto first = std::make_unique<Rig>();
  first->Attach(MakePublisher());
  const std::string endpoint = first->pub->endpoint(), replay = first->pub->replay_endpoint();
  auto f = Follower::Connect(endpoint, replay);
  ASSERT_TRUE(f.ok());
  BlockSet set;
  auto apply = [&](const Message& m) { set.Apply(m.batch); };
  Workload w(first->core.get());
  for (int step = 0; step < 120; ++step) {
    w.Step();
    std::this_thread::sleep_for(2ms);  // about one message per step
  }
  ASSERT_TRUE(*(*f)->WaitFor(first->pub->published() - 1, 10s, apply));
  ASSERT_GT(set.size(), 0u);
  const uint64_t before = first->pub->published();
  ASSERT_GE(before, 30u);

  // The "restart": a new engine and publisher on the same endpoints. The new engine's first
  // events queue up before its publisher exists and go out as one message.
  first.reset();
  Rig rig;
  Workload w2(rig.core.get());
  w2.rng.seed(99);
  for (int step = 0; step < 30; ++step) w2.Step();
  PublisherConfig c;
  c.endpoint = endpoint;
  c.replay_endpoint = replay;
  auto again = Publisher::Create(c, std::make_shared<metrics::Registry>());
  ASSERT_TRUE(again.ok()) << again.status().message();
  rig.Attach(std::move(again).value());
  // The follower sees numbers it already had with other contents, and replays from 0.
  for (int i = 0; i < 20 && (*f)->restarts() == 0; ++i) {
    w2.Step();
    ASSERT_TRUE((*f)->Pump(50ms, apply).ok());
  }
  ASSERT_LT(rig.pub->published(), before);  // the numbers repeated throughout
  EXPECT_EQ((*f)->restarts(), 1);
  EXPECT_EQ(set.cleared(), 2);
  ExpectInSync(**f, set, *rig.pub, *rig.core, "after the restart");
}

// Events lost to a full queue: the engine restarts the stream (cleared + every cached block)
// once there is room, and the follower ends up right again.
TEST(KvEventPublisherTest, DroppedEventsResynchroniseTheStream) {
  Rig rig(/*event_capacity=*/64);  // no publisher draining at first: the queue fills
  EngineCore* core = rig.core.get();
  Workload w(core);
  for (int step = 0; step < 200; ++step) w.Step();
  ASSERT_GT(core->Stats().events_dropped, 0);
  rig.Attach(MakePublisher());
  Publisher* pub = rig.pub.get();
  auto f = Follower::Connect(pub->endpoint(), pub->replay_endpoint());
  ASSERT_TRUE(f.ok());
  BlockSet set;
  for (int step = 0; step < 200; ++step) {
    w.Step();
    std::this_thread::sleep_for(1ms);  // the publisher keeps up
  }
  while (!core->idle()) core->Step();
  std::this_thread::sleep_for(50ms);
  core->Step();  // one more step boundary, for a resync still waiting for room
  ExpectInSync(**f, set, *pub, *core, "after resync");
  EXPECT_GE(set.cleared(), 2);
}

TEST(KvEventPublisherTest, BadEndpointsAreErrorsNamingTheFlag) {
  auto reg = std::make_shared<metrics::Registry>();
  PublisherConfig c;
  c.endpoint = "localhost:5557";
  auto p = Publisher::Create(c, reg);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-events 'localhost:5557'"), std::string::npos) << p.status().message();
  auto first = MakePublisher();
  c.endpoint = first->endpoint();
  p = Publisher::Create(c, reg);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cannot bind " + first->endpoint()), std::string::npos) << p.status().message();
  c.endpoint.clear();
  p = Publisher::Create(c, reg);
  EXPECT_FALSE(p.ok());  // neither bind nor connect
}

}  // namespace
}  // namespace tarmac::kvevents
