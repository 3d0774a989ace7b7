#include "sched/scheduler.h"

#include <algorithm>
#include <new>
#include <unordered_set>

#include "base/check.h"
#include "base/clock.h"
#include "tensor/kv_layout.h"

namespace tarmac::sched {

const char* RequestStateName(RequestState s) {
  switch (s) {
    case RequestState::kWaiting: return "waiting";
    case RequestState::kRunning: return "running";
    case RequestState::kPreempted: return "preempted";
    case RequestState::kFinished: return "finished";
  }
  return "?";
}

Status CheckAdmission(const SchedulerConfig& config, int32_t num_blocks, int64_t prompt_len,
                      int64_t max_tokens) {
  if (prompt_len <= 0) return InvalidField("prompt", "the prompt is empty (at least one token is needed)");
  if (prompt_len >= config.max_context) {
    return InvalidField("prompt",
                        "This model's maximum context length is {} tokens. However, your prompt has {} tokens "
                        "(at least one must be left for the completion), which exceeds the context.",
                        config.max_context, prompt_len)
        .WithField("prompt", "context_length_exceeded");
  }
  if (max_tokens < 1) return InvalidField("max_tokens", "max_tokens must be >= 1, got {}", max_tokens);
  if (prompt_len + max_tokens > config.max_context) {
    return InvalidField("max_tokens",
                        "This model's maximum context length is {} tokens. However, you requested {} tokens "
                        "({} in the prompt, {} for the completion), which exceeds the context of {} tokens. "
                        "Please reduce the prompt or max_tokens.",
                        config.max_context, prompt_len + max_tokens, prompt_len, max_tokens, config.max_context)
        .WithField("max_tokens", "context_length_exceeded");
  }
  const int64_t blocks = BlocksFor(prompt_len + max_tokens, config.block_size);
  if (blocks > num_blocks) {
    return InvalidField("max_tokens",
                        "prompt of {} tokens + max_tokens {} needs {} KV blocks but the whole cache has {}",
                        prompt_len, max_tokens, blocks, num_blocks);
  }
  return Status::Ok();
}

struct Scheduler::Req {
  int64_t id = 0;
  uint64_t ns = 0;
  int32_t priority = 0;
  prefix::SessionRetain session;
  int64_t arrival = 0;            // admission order, kept across preemption
  std::vector<int32_t> tokens;    // prompt + output so far
  int32_t prompt_len = 0;
  int32_t max_tokens = 0;
  bool reuse_prefix = true;
  int32_t computed = 0;           // tokens whose K/V is in the cache
  std::vector<int32_t> blocks;    // block table; one pool reference each
  prefix::PrefixMatch lock;       // cached path this request keeps locked
  bool locked = false;
  int32_t cached_blocks = 0;      // leading blocks already inserted into the tree
  int32_t freed_blocks = 0;       // leading entries of `blocks` released (kFreedBlock)
  int32_t lookahead = 0;          // draft slots wanted this step (SetLookahead)
  bool admitted_once = false;
  int32_t first_hit_tokens = 0;   // prefix-cache hit at the first admission
  bool fail_kv_alloc = false;     // test aid: EnsureBlocks throws std::bad_alloc
  bool alloc_failed = false;      // its allocation threw: waits for Finish, never admitted
  RequestState state = RequestState::kWaiting;
};

// Keeps running_slack_ exact across a change to one request: built before, destroyed after.
class Scheduler::SlackScope {
 public:
  SlackScope(Scheduler* s, const Req* r) : s_(s), r_(r), before_(s->Slack(r)) {}
  ~SlackScope() { s_->running_slack_.Add(s_->Slack(r_) - before_); }
  SlackScope(const SlackScope&) = delete;
  SlackScope& operator=(const SlackScope&) = delete;

 private:
  Scheduler* s_;
  const Req* r_;
  int64_t before_;
};

Scheduler::Scheduler(const SchedulerConfig& config, kv::BlockPool* pool, prefix::RadixTree* tree)
    : config_(config), pool_(pool), tree_(tree), now_(&NowSeconds), running_bound_(config.max_running) {
  TARMAC_CHECK(pool != nullptr && config.block_size >= 1 && config.max_batched_tokens >= 1 &&
               config.max_running >= 1 && config.max_context >= 1);
  TARMAC_CHECK(tree == nullptr || tree->block_size() == config.block_size);
  if (tree != nullptr) sessions_ = std::make_unique<prefix::SessionPins>(tree);
}

int64_t Scheduler::Slack(const Req* r) const {
  if (r->state != RequestState::kRunning) return 0;
  return static_cast<int64_t>(r->blocks.size()) * config_.block_size - r->computed;
}

void Scheduler::PublishCounts() {
  // A lowered cap binds once the requests above it have left.
  running_bound_ = std::max(config_.max_running, std::min(running_bound_, static_cast<int32_t>(running_.size())));
  num_running_.store(static_cast<int32_t>(running_.size()), std::memory_order_relaxed);
  num_waiting_.store(static_cast<int32_t>(waiting_.size()), std::memory_order_relaxed);
}

void Scheduler::SetLimits(int32_t max_batched_tokens, int32_t max_running) {
  TARMAC_CHECK(max_batched_tokens >= 1 && max_running >= 1);
  config_.max_batched_tokens = max_batched_tokens;
  config_.max_running = max_running;
  running_bound_ = std::max(max_running, static_cast<int32_t>(running_.size()));
}

void Scheduler::SetAdmitPriorityLimit(int32_t max_priority) { admit_priority_limit_ = max_priority; }

SchedulerCounters Scheduler::counters() const {
  SchedulerCounters c;
  c.preemptions = preemptions_.get();
  c.evicted_blocks = evicted_blocks_.get();
  c.prefix_queried_tokens = prefix_queried_tokens_.get();
  c.prefix_hit_tokens = prefix_hit_tokens_.get();
  c.sessions_released = sessions_released_.get();
  c.sessions_expired = sessions_expired_.get();
  return c;
}

Scheduler::~Scheduler() {
  for (auto& [id, r] : reqs_) ReleaseAll(r.get());
}

bool Scheduler::Before(const Req* a, const Req* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->arrival < b->arrival;
}

Status Scheduler::Add(NewRequest nr) {
  TARMAC_RETURN_IF_ERROR(CheckAdmission(config_, pool_->num_blocks(),
                                        static_cast<int64_t>(nr.prompt.size()), nr.max_tokens));
  if (reqs_.count(nr.id) != 0) return InvalidArgument("request id {} is already in use", nr.id);
  TARMAC_RETURN_IF_ERROR(prefix::CheckSession(nr.session));
  auto r = std::make_unique<Req>();
  r->id = nr.id;
  r->ns = nr.ns;
  r->priority = nr.priority;
  r->session = nr.session;
  r->arrival = arrivals_++;
  r->prompt_len = static_cast<int32_t>(nr.prompt.size());
  r->max_tokens = nr.max_tokens;
  r->reuse_prefix = nr.reuse_prefix;
  r->fail_kv_alloc = nr.fail_kv_alloc_for_testing;
  r->tokens = std::move(nr.prompt);
  r->tokens.reserve(r->tokens.size() + nr.max_tokens);
  waiting_.push_back(r.get());
  reqs_.emplace(nr.id, std::move(r));
  PublishCounts();
  return Status::Ok();
}

RequestState Scheduler::state(int64_t id) const {
  auto it = reqs_.find(id);
  return it == reqs_.end() ? RequestState::kFinished : it->second->state;
}

int32_t Scheduler::num_output(int64_t id) const {
  auto it = reqs_.find(id);
  TARMAC_CHECK(it != reqs_.end());
  return static_cast<int32_t>(it->second->tokens.size()) - it->second->prompt_len;
}

const std::vector<int32_t>& Scheduler::tokens(int64_t id) const {
  auto it = reqs_.find(id);
  TARMAC_CHECK(it != reqs_.end());
  return it->second->tokens;
}

int32_t Scheduler::prefix_hit_tokens(int64_t id) const {
  auto it = reqs_.find(id);
  TARMAC_CHECK(it != reqs_.end());
  return it->second->first_hit_tokens;
}

bool Scheduler::EnsureBlocks(Req* r, int64_t tokens) {
  SlackScope scope(this, r);
  const size_t need = static_cast<size_t>(BlocksFor(tokens, config_.block_size));
  while (r->blocks.size() < need) {
    std::optional<int32_t> b = pool_->Allocate();
    if (!b && tree_ != nullptr) {
      const int64_t want = static_cast<int64_t>(need - r->blocks.size());
      evicted_blocks_.Add(tree_->Evict(want));
      b = pool_->Allocate();
      // Sessions' pinned prefixes go before any running request does.
      while (!b && sessions_->num_sessions() > 0) {
        sessions_released_.Add(sessions_->ReleaseOldest(want));
        evicted_blocks_.Add(tree_->Evict(want));
        b = pool_->Allocate();
      }
    }
    if (!b) return false;
    try {
      if (r->fail_kv_alloc) throw std::bad_alloc();
      r->blocks.push_back(*b);
    } catch (...) {
      pool_->Release(*b);  // not in the table yet: nobody else would return it
      throw;
    }
  }
  return true;
}

void Scheduler::ReleaseAll(Req* r) {
  SlackScope scope(this, r);
  if (r->locked) {
    tree_->Unlock(r->lock);
    r->lock = {};
    r->locked = false;
  }
  for (int32_t b : r->blocks) {
    if (b != kFreedBlock) pool_->Release(b);
  }
  r->blocks.clear();
  r->computed = 0;
  r->cached_blocks = 0;
  r->freed_blocks = 0;
}

// Reuses the longest cached prefix (whole blocks, never the last token).
bool Scheduler::AdmitPrefix(Req* r) {
  if (tree_ == nullptr || !r->reuse_prefix || r->computed != 0 || !r->blocks.empty()) return false;
  const int64_t len = static_cast<int64_t>(r->tokens.size());
  prefix::PrefixMatch m = tree_->Match(r->ns, r->tokens, (len - 1) / config_.block_size);
  if (m.num_blocks() == 0) return false;
  tree_->Lock(m);
  for (int32_t b : m.blocks) pool_->Ref(b);
  r->blocks = m.blocks;
  r->computed = static_cast<int32_t>(m.num_blocks()) * config_.block_size;
  r->cached_blocks = static_cast<int32_t>(m.num_blocks());
  r->lock = std::move(m);
  r->locked = true;
  return true;
}

Scheduler::Req* Scheduler::PickVictim(const Req* requester) const {
  Req* worst = nullptr;
  for (Req* r : running_) {
    if (worst == nullptr || Before(worst, r)) worst = r;
  }
  if (requester != nullptr && worst != nullptr && worst->priority <= requester->priority) {
    return nullptr;  // a waiting request only displaces a strictly less important class
  }
  return worst;
}

void Scheduler::Preempt(Req* r, SchedulerOutput* out, int32_t* budget) {
  for (size_t i = 0; i < out->seqs.size(); ++i) {
    if (out->seqs[i].id == r->id) {
      *budget += out->seqs[i].num_tokens;
      out->num_tokens -= out->seqs[i].num_tokens;
      out->seqs.erase(out->seqs.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  ReleaseAll(r);
  r->state = RequestState::kPreempted;
  running_.erase(std::find(running_.begin(), running_.end(), r));
  waiting_.push_back(r);
  out->preempted.push_back(r->id);
  preemptions_.Add(1);
  PublishCounts();
}

void Scheduler::FailAllocation(Req* r, SchedulerOutput* out) {
  ReleaseAll(r);
  if (r->state == RequestState::kRunning) {
    r->state = RequestState::kPreempted;
    running_.erase(std::find(running_.begin(), running_.end(), r));
    waiting_.push_back(r);
  }
  r->alloc_failed = true;
  out->failed.push_back(r->id);
  PublishCounts();
}

int64_t Scheduler::EvictCachedBeyond(int32_t max_cached_blocks) {
  TARMAC_CHECK(max_cached_blocks >= 0);
  if (tree_ == nullptr) return 0;
  const int32_t cached = Usage().cached_only_blocks;
  if (cached <= max_cached_blocks) return 0;
  const int64_t n = tree_->Evict(cached - max_cached_blocks);
  evicted_blocks_.Add(n);
  PublishCounts();
  return n;
}

std::vector<int64_t> Scheduler::PreemptAbove(int32_t max_priority) {
  std::vector<int64_t> ids;
  SchedulerOutput none;  // between steps: no batch to take the victims out of
  int32_t budget = 0;
  for (;;) {
    Req* v = PickVictim(nullptr);
    if (v == nullptr || v->priority <= max_priority) break;
    Preempt(v, &none, &budget);
    ids.push_back(v->id);
  }
  return ids;
}

SchedulerOutput Scheduler::Schedule() {
  if (sessions_) sessions_expired_.Add(sessions_->Expire(now_()));
  SchedulerOutput out;
  int32_t budget = config_.max_batched_tokens;
  auto push = [&](Req* r, int32_t n, int32_t draft) {
    const bool sample = r->computed + n - draft == static_cast<int32_t>(r->tokens.size());
    out.seqs.push_back({r->id, r->computed, n, sample, draft, &r->tokens, &r->blocks});
    out.num_tokens += n;
    budget -= n;
  };

  // 1. Running requests: decodes, then unfinished prefills.
  std::vector<Req*> order = running_;
  std::stable_sort(order.begin(), order.end(), [](const Req* a, const Req* b) {
    const bool da = a->tokens.size() - a->computed == 1, db = b->tokens.size() - b->computed == 1;
    if (da != db) return da;
    return Before(a, b);
  });
  for (Req* r : order) {
    if (budget == 0) break;
    if (r->state != RequestState::kRunning) continue;  // preempted by an earlier one
    const int32_t known = static_cast<int32_t>(r->tokens.size()) - r->computed;
    int32_t draft = known == 1 ? std::clamp(r->lookahead, 0, budget - 1) : 0;
    draft = std::min(draft, config_.max_context - static_cast<int32_t>(r->tokens.size()));
    draft = std::max(draft, 0);
    const int32_t n = std::min<int32_t>(known, budget) + draft;
    TARMAC_DCHECK(n >= 1);
    try {
      while (!EnsureBlocks(r, static_cast<int64_t>(r->computed) + n)) {
        Req* v = PickVictim(nullptr);
        Preempt(v, &out, &budget);
        if (v == r) break;
      }
    } catch (const std::bad_alloc&) {
      FailAllocation(r, &out);
      continue;
    }
    if (r->state == RequestState::kRunning) push(r, n, draft);
  }
  for (Req* r : running_) r->lookahead = 0;

  // 2. Waiting requests, most important first, while budget and running slots last.
  std::vector<Req*> queue = waiting_;
  std::stable_sort(queue.begin(), queue.end(), Before);
  for (Req* r : queue) {
    if (budget == 0) break;
    if (r->alloc_failed) continue;  // waits for its Finish
    if (r->priority > admit_priority_limit_) break;  // held back by the knob, and so is the rest
    // Room under the running cap, displacing less important requests (more than one only
    // when the cap was lowered below the running count).
    while (static_cast<int32_t>(running_.size()) >= config_.max_running) {
      Req* v = PickVictim(r);
      if (v == nullptr) break;
      Preempt(v, &out, &budget);
    }
    if (static_cast<int32_t>(running_.size()) >= config_.max_running) break;
    bool hit = false, ok = false;
    int32_t n = 0;
    try {
      hit = AdmitPrefix(r);
      n = std::min<int32_t>(static_cast<int32_t>(r->tokens.size()) - r->computed, budget);
      ok = EnsureBlocks(r, static_cast<int64_t>(r->computed) + n);
      while (!ok) {
        Req* v = PickVictim(r);
        if (v == nullptr) break;
        Preempt(v, &out, &budget);
        ok = EnsureBlocks(r, static_cast<int64_t>(r->computed) + n);
      }
    } catch (const std::bad_alloc&) {
      FailAllocation(r, &out);
      continue;
    }
    if (!ok) {
      ReleaseAll(r);
      break;  // FCFS: nothing behind it jumps the queue
    }
    prefix_queried_tokens_.Add(static_cast<int64_t>(r->tokens.size()));
    if (hit) prefix_hit_tokens_.Add(r->computed);
    if (!r->admitted_once) r->first_hit_tokens = r->computed;
    r->admitted_once = true;
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r));
    running_.push_back(r);
    {
      SlackScope scope(this, r);
      r->state = RequestState::kRunning;
    }
    push(r, n, 0);
  }
  PublishCounts();
  return out;
}

void Scheduler::CacheFullBlocks(Req* r) {
  // A table with freed entries no longer spells its prefix from the root.
  if (tree_ == nullptr || r->freed_blocks > 0) return;
  const int32_t full = r->computed / config_.block_size;
  if (full <= r->cached_blocks) return;
  const std::span<const int32_t> toks(r->tokens);
  const std::span<const int32_t> blocks(r->blocks);
  tree_->Insert(r->ns, toks.first(static_cast<size_t>(full) * config_.block_size),
                blocks.first(static_cast<size_t>(full)));
  prefix::PrefixMatch m = tree_->Match(r->ns, toks, full);
  TARMAC_DCHECK(m.num_blocks() == full);
  tree_->Lock(m);
  if (r->locked) tree_->Unlock(r->lock);
  r->lock = std::move(m);
  r->locked = true;
  r->cached_blocks = full;
}

void Scheduler::Commit(const SchedulerOutput& out) {
  for (const ScheduledSeq& s : out.seqs) {
    auto it = reqs_.find(s.id);
    TARMAC_CHECK(it != reqs_.end() && it->second->state == RequestState::kRunning);
    Req* r = it->second.get();
    TARMAC_CHECK(r->computed == s.start);
    SlackScope scope(this, r);
    r->computed += s.num_tokens - s.num_draft;
    CacheFullBlocks(r);
  }
}

void Scheduler::AppendToken(int64_t id, int32_t token) {
  auto it = reqs_.find(id);
  TARMAC_CHECK(it != reqs_.end());
  Req* r = it->second.get();
  TARMAC_CHECK(r->state == RequestState::kRunning &&
               r->computed == static_cast<int32_t>(r->tokens.size()));
  r->tokens.push_back(token);
}

void Scheduler::SetLookahead(int64_t id, int32_t n) {
  auto it = reqs_.find(id);
  if (it == reqs_.end() || it->second->state != RequestState::kRunning) return;
  it->second->lookahead = std::max(n, 0);
}

void Scheduler::AcceptDraftToken(int64_t id, int32_t token) {
  auto it = reqs_.find(id);
  TARMAC_CHECK(it != reqs_.end());
  Req* r = it->second.get();
  TARMAC_CHECK(r->state == RequestState::kRunning &&
               r->computed == static_cast<int32_t>(r->tokens.size()));
  TARMAC_CHECK(static_cast<int64_t>(r->blocks.size()) * config_.block_size > r->computed);
  SlackScope scope(this, r);
  r->tokens.push_back(token);
  ++r->computed;
  CacheFullBlocks(r);
}

void Scheduler::TrimToComputed(int64_t id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  Req* r = it->second.get();
  SlackScope scope(this, r);
  const size_t keep = static_cast<size_t>(BlocksFor(r->computed, config_.block_size));
  while (r->blocks.size() > keep) {
    pool_->Release(r->blocks.back());
    r->blocks.pop_back();
  }
}

int32_t Scheduler::ReleaseOutsideWindow(int64_t id, int32_t window) {
  TARMAC_CHECK(window >= 1);
  auto it = reqs_.find(id);
  if (it == reqs_.end() || it->second->state != RequestState::kRunning) return 0;
  Req* r = it->second.get();
  // Block i holds positions [i * bs, (i + 1) * bs): unread once (i + 1) * bs <= first needed.
  const int64_t first_needed = static_cast<int64_t>(r->computed) - window + 1;
  const int32_t unread = static_cast<int32_t>(std::max<int64_t>(first_needed, 0) / config_.block_size);
  if (unread <= r->freed_blocks) return 0;
  if (r->locked) {  // the cached path stays in the tree, evictable
    tree_->Unlock(r->lock);
    r->lock = {};
    r->locked = false;
  }
  int32_t released = 0;
  for (int32_t i = r->freed_blocks; i < unread; ++i) {
    pool_->Release(r->blocks[i]);
    r->blocks[i] = kFreedBlock;
    ++released;
  }
  r->freed_blocks = unread;
  return released;
}

std::vector<int64_t> Scheduler::DecodeReady() const {
  std::vector<int64_t> ids;
  for (const Req* r : running_)
    if (static_cast<int32_t>(r->tokens.size()) - r->computed == 1) ids.push_back(r->id);
  return ids;
}

void Scheduler::Finish(int64_t id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  Req* r = it->second.get();
  if (r->session.id != 0 && r->locked) sessions_->Retain(r->ns, r->session, r->lock, now_());
  ReleaseAll(r);
  auto drop = [r](std::vector<Req*>& v) {
    auto p = std::find(v.begin(), v.end(), r);
    if (p != v.end()) v.erase(p);
  };
  drop(running_);
  drop(waiting_);
  reqs_.erase(it);
  PublishCounts();
}

KvUsage Scheduler::Usage() const {
  KvUsage u;
  u.total_blocks = pool_->num_blocks();
  u.free_blocks = pool_->num_free();
  u.request_blocks = pool_->num_request_held();
  u.cached_only_blocks = pool_->num_cache_only();
  u.allocated_slots = static_cast<int64_t>(u.request_blocks) * config_.block_size;
  u.unused_slots = running_slack_.get();
  return u;
}

Status Scheduler::CheckIntegrity() const {
  TARMAC_RETURN_IF_ERROR(pool_->CheckIntegrity());
  std::vector<int32_t> holders(static_cast<size_t>(pool_->num_blocks()), 0);
  if (tree_ != nullptr) {
    TARMAC_RETURN_IF_ERROR(tree_->CheckIntegrity());
    TARMAC_RETURN_IF_ERROR(sessions_->CheckIntegrity());
    for (int32_t b : tree_->CachedBlocks()) ++holders[b];
  }
  if (reqs_.size() != running_.size() + waiting_.size()) {
    return Internal("{} requests but {} running + {} waiting", reqs_.size(), running_.size(),
                    waiting_.size());
  }
  if (static_cast<int32_t>(running_.size()) > running_bound_) {
    return Internal("{} running requests exceed the cap of {}", running_.size(), running_bound_);
  }
  if (num_running() != static_cast<int32_t>(running_.size()) || num_waiting() != static_cast<int32_t>(waiting_.size()))
    return Internal("published {} running / {} waiting, listed {} / {}", num_running(), num_waiting(),
                    running_.size(), waiting_.size());
  int64_t slack = 0;
  for (const Req* r : running_) slack += Slack(r);
  if (slack != running_slack_.get())
    return Internal("running requests' tail slack is {} slots, tracked {}", slack, running_slack_.get());
  for (const Req* r : waiting_) {
    if (r->state != RequestState::kWaiting && r->state != RequestState::kPreempted)
      return Internal("request {} is queued but {}", r->id, RequestStateName(r->state));
    if (!r->blocks.empty() || r->computed != 0 || r->locked)
      return Internal("waiting request {} holds KV", r->id);
  }
  for (const Req* r : running_) {
    if (r->state != RequestState::kRunning)
      return Internal("request {} is in the running list but {}", r->id, RequestStateName(r->state));
    if (static_cast<int64_t>(r->blocks.size()) * config_.block_size < r->computed ||
        r->computed > static_cast<int32_t>(r->tokens.size()))
      return Internal("request {}: {} blocks for {} computed of {} tokens", r->id,
                      r->blocks.size(), r->computed, r->tokens.size());
    if (r->cached_blocks * config_.block_size > r->computed)
      return Internal("request {} cached {} blocks but computed {} tokens", r->id,
                      r->cached_blocks, r->computed);
    if (r->freed_blocks * config_.block_size > r->computed)
      return Internal("request {} freed {} blocks but computed {} tokens", r->id,
                      r->freed_blocks, r->computed);
    std::unordered_set<int32_t> mine;
    for (size_t i = 0; i < r->blocks.size(); ++i) {
      const int32_t b = r->blocks[i];
      if ((b == kFreedBlock) != (static_cast<int32_t>(i) < r->freed_blocks))
        return Internal("request {}: block-table entry {} is {}", r->id, i, b);
      if (b == kFreedBlock) continue;
      if (!mine.insert(b).second) return Internal("request {} lists a block twice", r->id);
      ++holders[b];
    }
  }
  for (int32_t b = 0; b < pool_->num_blocks(); ++b) {
    if (pool_->refcount(b) != holders[b]) {
      return Internal("block {} has refcount {} but {} holders (requests + cache)", b,
                      pool_->refcount(b), holders[b]);
    }
  }
  return Status::Ok();
}

}  // namespace tarmac::sched
