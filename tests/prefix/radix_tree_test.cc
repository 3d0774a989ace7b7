#include "prefix/radix_tree.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>

#include <gtest/gtest.h>

namespace tarmac::prefix {
namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> Seq(std::initializer_list<int32_t> t) { return t; }

// Allocates n blocks, evicting from the tree when the pool runs dry.
std::vector<int32_t> AllocBlocks(kv::BlockPool* pool, RadixTree* tree, int64_t n,
                                 int64_t* evicted = nullptr) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    auto b = pool->Allocate();
    if (!b) {
      const int64_t e = tree->Evict(1);
      if (evicted != nullptr) *evicted += e;
      b = pool->Allocate();
    }
    if (!b) break;
    out.push_back(*b);
  }
  return out;
}

TEST(RadixTreeTest, MatchInsertLockEvict) {
  kv::BlockPool pool(8);
  RadixTree tree(&pool, kBs);
  const auto toks = Seq({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  auto blocks = AllocBlocks(&pool, &tree, 2);
  EXPECT_EQ(tree.Insert(7, toks, blocks), 2);
  for (int32_t b : blocks) pool.Release(b);  // the request finishes; the tree keeps them
  EXPECT_EQ(pool.num_used(), 2);
  ASSERT_TRUE(tree.CheckIntegrity().ok());

  // Full-block granularity, capped by max_blocks (the last prompt token is always computed).
  auto m = tree.Match(7, toks, (static_cast<int64_t>(toks.size()) - 1) / kBs);
  EXPECT_EQ(m.blocks, blocks);
  m = tree.Match(7, Seq({1, 2, 3, 4, 5, 6, 7, 8}), (8 - 1) / kBs);
  EXPECT_EQ(m.num_blocks(), 1);
  m = tree.Match(7, Seq({1, 2, 3, 9, 5, 6, 7, 8}), 2);
  EXPECT_EQ(m.num_blocks(), 0);
  // Another namespace (another tenant or model) never sees these blocks.
  EXPECT_EQ(tree.Match(8, toks, 2).num_blocks(), 0);

  // Locked prefixes survive eviction; unlocked ones go, leaf first.
  m = tree.Match(7, toks, 1);
  tree.Lock(m);
  EXPECT_EQ(tree.Evict(10), 1);  // only the second block was evictable
  EXPECT_EQ(tree.num_nodes(), 1);
  ASSERT_TRUE(tree.CheckIntegrity().ok());
  tree.Unlock(m);
  EXPECT_EQ(tree.Evict(10), 1);
  EXPECT_EQ(pool.num_free(), 8);
  ASSERT_TRUE(tree.CheckIntegrity().ok());
  ASSERT_TRUE(pool.CheckIntegrity().ok());
}

TEST(RadixTreeTest, DuplicateInsertKeepsTheCachedBlock) {
  kv::BlockPool pool(8);
  RadixTree tree(&pool, kBs);
  const auto toks = Seq({1, 2, 3, 4, 5, 6, 7, 8});
  auto a = AllocBlocks(&pool, &tree, 2);
  auto b = AllocBlocks(&pool, &tree, 2);
  EXPECT_EQ(tree.Insert(1, toks, a), 2);
  EXPECT_EQ(tree.Insert(1, toks, b), 0);  // same tokens computed twice: the first copy stays
  for (int32_t x : a) pool.Release(x);
  for (int32_t x : b) pool.Release(x);
  EXPECT_EQ(pool.num_used(), 2);
  EXPECT_EQ(tree.Match(1, toks, 2).blocks, a);
  ASSERT_TRUE(tree.CheckIntegrity().ok());
}

TEST(RadixTreeTest, EvictsLeastRecentlyUsedFirst) {
  kv::BlockPool pool(8);
  RadixTree tree(&pool, kBs);
  const auto x = Seq({1, 1, 1, 1}), y = Seq({2, 2, 2, 2});
  auto bx = AllocBlocks(&pool, &tree, 1), by = AllocBlocks(&pool, &tree, 1);
  tree.Insert(0, x, bx);
  tree.Insert(0, y, by);
  pool.Release(bx[0]);
  pool.Release(by[0]);
  tree.Match(0, x, 1);  // x is now more recent than y
  EXPECT_EQ(tree.Evict(1), 1);
  EXPECT_EQ(tree.Match(0, x, 1).num_blocks(), 1);
  EXPECT_EQ(tree.Match(0, y, 1).num_blocks(), 0);
}

// Requests over a small alphabet (so prefixes are shared) in 3 namespaces, on a pool small
// enough to force eviction. After every step: both managers' integrity checks, and every
// block's refcount equals (requests holding it) + (1 if cached), i.e. free + held by
// requests + held only by the tree = total.
// Requests of random token sequences in three namespaces (tokens from {0, 1}, so prefixes are
// shared often) that match, lock, allocate (evicting), and finish or are cancelled.
class RandomWorkload {
 public:
  RandomWorkload(kv::BlockPool* pool, RadixTree* tree, uint32_t seed) : pool_(pool), tree_(tree), rng_(seed) {}

  void Step() {
    if (running_.size() < 4 && rng_() % 2 == 0) {
      Req r;
      r.ns = rng_() % 3;
      const int len = 1 + static_cast<int>(rng_() % 20);
      for (int i = 0; i < len; ++i) r.tokens.push_back(static_cast<int32_t>(rng_() % 2));
      r.match = tree_->Match(r.ns, r.tokens, (len - 1) / kBs);
      tree_->Lock(r.match);
      for (int32_t b : r.match.blocks) pool_->Ref(b);  // the request's own reference
      const int64_t need = (len + kBs - 1) / kBs - r.match.num_blocks();
      hit_blocks += r.match.num_blocks();
      r.own = AllocBlocks(pool_, tree_, need, &evicted);
      running_.push_back(std::move(r));
      if (static_cast<int64_t>(running_.back().own.size()) < need) Finish(running_.size() - 1, false);
    } else if (!running_.empty()) {
      Finish(rng_() % running_.size(), rng_() % 4 != 0);  // some requests are cancelled
    }
  }
  void FinishAll() {
    while (!running_.empty()) Finish(0, true);
  }
  // Expected pool refcount of every block: the requests' references plus the tree's.
  std::map<int32_t, int32_t> ExpectedRefs() const {
    std::map<int32_t, int32_t> expect;
    for (const Req& r : running_) {
      for (int32_t b : r.match.blocks) expect[b]++;
      for (int32_t b : r.own) expect[b]++;
    }
    for (int32_t b : tree_->CachedBlocks()) expect[b]++;
    return expect;
  }
  int64_t evicted = 0, hit_blocks = 0;

 private:
  struct Req {
    uint64_t ns;
    std::vector<int32_t> tokens;
    PrefixMatch match;
    std::vector<int32_t> own;  // blocks allocated by the request (beyond the cached prefix)
  };
  void Finish(size_t i, bool insert) {
    Req& r = running_[i];
    std::vector<int32_t> all = r.match.blocks;
    all.insert(all.end(), r.own.begin(), r.own.end());
    const size_t full = std::min(all.size(), r.tokens.size() / kBs);
    if (insert) tree_->Insert(r.ns, r.tokens, std::span<const int32_t>(all).first(full));
    tree_->Unlock(r.match);
    for (int32_t b : r.match.blocks) pool_->Release(b);
    for (int32_t b : r.own) pool_->Release(b);
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  kv::BlockPool* pool_;
  RadixTree* tree_;
  std::mt19937 rng_;
  std::vector<Req> running_;
};

TEST(RadixTreeTest, RandomisedWorkloadKeepsAccounting) {
  kv::BlockPool pool(40);
  RadixTree tree(&pool, kBs);
  RandomWorkload w(&pool, &tree, 17);
  for (int step = 0; step < 3000; ++step) {
    w.Step();
    ASSERT_TRUE(tree.CheckIntegrity().ok()) << step << ": " << tree.CheckIntegrity().message();
    ASSERT_TRUE(pool.CheckIntegrity().ok()) << step;
    const std::map<int32_t, int32_t> expect = w.ExpectedRefs();
    for (int32_t b = 0; b < pool.num_blocks(); ++b) {
      const auto it = expect.find(b);
      ASSERT_EQ(pool.refcount(b), it == expect.end() ? 0 : it->second) << "block " << b << " step " << step;
    }
  }
  // The workload really exercised sharing and eviction.
  EXPECT_GT(w.hit_blocks, 100);
  EXPECT_GT(w.evicted, 10);
  w.FinishAll();
  tree.Evict(1 << 20);
  EXPECT_EQ(tree.num_nodes(), 0);
  EXPECT_EQ(pool.num_free(), pool.num_blocks());
}

// A follower of the events: the set of block hashes it believes cached, with their parents.
struct Follower {
  std::map<uint64_t, std::optional<uint64_t>> blocks;
  int64_t orphans = 0, unknown_removals = 0, duplicates = 0;
  void Apply(const std::vector<BlockEvent>& events) {
    for (const BlockEvent& e : events) {
      switch (e.kind) {
        case BlockEvent::Kind::kCleared: blocks.clear(); break;
        case BlockEvent::Kind::kStored:
          if (e.parent && !blocks.count(*e.parent)) ++orphans;
          if (!blocks.emplace(e.hash, e.parent).second) ++duplicates;
          break;
        case BlockEvent::Kind::kRemoved:
          if (!blocks.erase(e.hash)) ++unknown_removals;
          break;
      }
    }
  }
  std::vector<uint64_t> Hashes() const {
    std::vector<uint64_t> h;
    for (const auto& [k, p] : blocks) h.push_back(k);
    return h;
  }
};

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(RadixTreeTest, ReplayingTheEventsReconstructsTheCachedBlocks) {
  kv::BlockPool pool(40);
  RadixTree tree(&pool, kBs);
  RandomWorkload w(&pool, &tree, 23);
  for (int step = 0; step < 300; ++step) w.Step();  // some blocks cached before anyone follows
  ASSERT_GT(tree.num_nodes(), 0);
  tree.EnableEvents(true);
  Follower f;
  std::vector<BlockEvent> events;
  int64_t stored = 0, removed = 0;
  for (int step = 0; step < 3000; ++step) {
    w.Step();
    events.clear();
    tree.TakeEvents(&events);
    for (const BlockEvent& e : events) {
      stored += e.kind == BlockEvent::Kind::kStored;
      removed += e.kind == BlockEvent::Kind::kRemoved;
    }
    f.Apply(events);
    ASSERT_EQ(f.Hashes(), Sorted(tree.CachedBlockHashes())) << "step " << step;
  }
  EXPECT_EQ(f.orphans, 0);
  EXPECT_EQ(f.unknown_removals, 0);
  EXPECT_EQ(f.duplicates, 0);
  EXPECT_GT(stored, 200);
  EXPECT_GT(removed, 100);
  // Every parent a stored block named is itself followed (0 orphan parents at the end).
  for (const auto& [h, parent] : f.blocks) {
    if (parent) {
      EXPECT_TRUE(f.blocks.count(*parent)) << h;
    }
  }
}

TEST(RadixTreeTest, ChainedHashesAreDeterministicAndPerNamespace) {
  const auto toks = Seq({1, 2, 3, 4, 5, 6, 7, 8});
  std::vector<uint64_t> first;
  for (int run = 0; run < 2; ++run) {  // two trees, as across a restart
    kv::BlockPool pool(8);
    RadixTree tree(&pool, kBs);
    tree.EnableEvents(true);
    auto blocks = AllocBlocks(&pool, &tree, 4);
    tree.Insert(5, toks, std::span<const int32_t>(blocks).first(2));
    tree.Insert(6, toks, std::span<const int32_t>(blocks).subspan(2, 2));
    std::vector<BlockEvent> ev;
    tree.TakeEvents(&ev);
    ASSERT_EQ(ev.size(), 5u);
    EXPECT_EQ(ev[0].kind, BlockEvent::Kind::kCleared);
    EXPECT_FALSE(ev[1].parent.has_value());  // a namespace's first block has no parent
    EXPECT_EQ(*ev[2].parent, ev[1].hash);
    EXPECT_EQ(ev[2].tokens, Seq({5, 6, 7, 8}));
    EXPECT_NE(ev[1].hash, ev[3].hash);  // same tokens, another namespace
    std::vector<uint64_t> h;
    for (const BlockEvent& e : ev) h.push_back(e.hash);
    if (run == 0) first = h;
    else EXPECT_EQ(h, first);
    for (int32_t b : blocks) pool.Release(b);
  }
}

}  // namespace
}  // namespace tarmac::prefix
