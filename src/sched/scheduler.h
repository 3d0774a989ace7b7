// Scheduler: decides, step by step, which requests compute how many tokens, and owns their KV
// block tables. It never sees model code: it speaks token ids, positions and block ids (the
// block arithmetic it shares with the KV cache is tensor/kv_layout.h).
//
// Request lifecycle: waiting -> running -> finished, plus preempted (a running request whose
// blocks were taken back; it waits again and recomputes, reusing its prefix if still cached).
// Each Schedule() builds one batch under a token budget (max_batched_tokens) and a cap on
// running requests: running decodes first, then running prefills, then chunks of waiting
// prefills (a long prompt is split across steps so decodes keep flowing). Order within each
// group: priority class, then arrival (FCFS).
//
// Out of memory: a std::bad_alloc while allocating one request's KV blocks fails that request
// only (SchedulerOutput::failed; its blocks are returned), the step goes on with the others.
//
// Priority: an integer class per request; a SMALLER value is more important (vLLM's
// convention). Requests of a larger class wait and are preempted first.
//
// Blocks: a request holds one BlockPool reference per block in its table. With the prefix
// cache on, full computed blocks are inserted into the radix tree as they fill (so requests
// arriving meanwhile share them) and the request locks its cached path; on admission a
// request reuses the longest cached prefix of its namespace (never the last prompt token).
// When the pool runs dry: evict unlocked cached prefixes (LRU), then release sessions' pinned
// prefixes (least recently used first), then preempt the least important running request
// (largest class, latest arrival) by recompute.
//
// Sessions (prefix cache on): a finished request that belongs to a session leaves its cached
// path pinned for the session's TTL (prefix::SessionPins), so the conversation's next turn
// finds its history cached even after other traffic filled the cache.
//
// Knobs: the token budget, the running cap and an admission priority limit can change between
// steps (SetLimits, SetAdmitPriorityLimit); they apply from the next Schedule(). Lowering the
// running cap below the running count admits nobody until requests finish (no preemption).
//
// Owns the per-request state; borrows the pool and the tree (tree may be null: no prefix
// cache). Not thread-safe: the engine's step thread calls every method except counters(),
// Usage(), num_running() and num_waiting(), which any thread may call (single-writer atomics,
// O(1): each value whole, not a snapshot of all). Mutating: Add, Schedule, Commit, AppendToken,
// SetLookahead, AcceptDraftToken, TrimToComputed, Finish, SetLimits, SetAdmitPriorityLimit,
// EvictCachedBeyond, PreemptAbove.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kv/block_pool.h"
#include "tensor/kv_layout.h"
#include "prefix/radix_tree.h"
#include "prefix/session_pins.h"

namespace tarmac::sched {

enum class RequestState { kWaiting, kRunning, kPreempted, kFinished };
const char* RequestStateName(RequestState s);

// The engine's scheduler settings; the defaults here are every subcommand's defaults.
struct SchedulerConfig {
  int32_t block_size = kDefaultBlockSize;  // tokens per KV block (must equal the pool's and tree's)
  int32_t max_batched_tokens = 512; // tokens computed per step, all requests together
  int32_t max_running = 64;         // requests holding KV at once
  int32_t max_context = 0;          // tokens per sequence (prompt + output); the engine sets 0
                                    // to the model's training context; the Scheduler needs >= 1
};

// Checks that a request can ever run: prompt non-empty and shorter than the context, max_tokens
// >= 1, prompt + max_tokens within the context and within the whole pool. The error names the
// numbers and the field ("prompt" or "max_tokens"; reason "context_length_exceeded" when the
// context is what does not fit).
Status CheckAdmission(const SchedulerConfig& config, int32_t num_blocks, int64_t prompt_len,
                      int64_t max_tokens);

struct NewRequest {
  int64_t id = 0;                 // unique among live requests
  uint64_t ns = 0;                // prefix-cache namespace (tenant salt + model)
  int32_t priority = 0;           // class; smaller is more important
  std::vector<int32_t> prompt;    // token ids, non-empty
  int32_t max_tokens = 16;        // output tokens at most
  prefix::SessionRetain session{};  // id 0: none; else its cached path stays pinned after it ends
  // false: never start from a cached prefix (every prompt token is computed: the caller wants
  // their logits, e.g. prompt logprobs); its blocks are still cached for others.
  bool reuse_prefix = true;
  // Test aid (engine fault injection): allocating this request's KV blocks throws
  // std::bad_alloc, as a real out-of-memory there would.
  bool fail_kv_alloc_for_testing = false;
};

// One request's share of a step: compute tokens[start, start + num_tokens) at those positions.
// With speculation, the last num_draft of them are draft tokens the engine supplies (they are
// not in *tokens yet): positions start + num_tokens - num_draft ... are verified this step.
struct ScheduledSeq {
  int64_t id;
  int32_t start;        // tokens already in the KV cache before this step
  int32_t num_tokens;   // >= 1, drafts included
  bool sample;          // after this step every known token is computed: sample the next one
  int32_t num_draft;    // lookahead slots for draft tokens (0 without speculation)
  const std::vector<int32_t>* tokens;       // the request's prompt + output so far
  const std::vector<int32_t>* block_table;  // covers positions [0, start + num_tokens)
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;
  int32_t num_tokens = 0;
  std::vector<int64_t> preempted;  // requests preempted while building this step
  // Requests whose KV allocation threw std::bad_alloc while building this step: they hold no
  // blocks, are never scheduled again, and the caller must Finish them (and fail them).
  std::vector<int64_t> failed;
  bool empty() const { return seqs.empty(); }
};

// Cumulative counters since construction (a snapshot).
struct SchedulerCounters {
  int64_t preemptions = 0;
  int64_t evicted_blocks = 0;        // cached blocks returned to the pool by eviction
  int64_t sessions_released = 0;     // session pins released early to make room
  int64_t sessions_expired = 0;      // session pins whose TTL ran out
  int64_t prefix_queried_tokens = 0; // prompt tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;     // of those, found cached (prefill tokens saved)
};

// KV occupancy right now.
struct KvUsage {
  int32_t total_blocks = 0;
  int32_t free_blocks = 0;
  int32_t request_blocks = 0;      // held by at least one request
  int32_t cached_only_blocks = 0;  // held only by the prefix cache
  int64_t allocated_slots = 0;     // token slots in blocks held by running requests
  int64_t unused_slots = 0;        // of those, not holding a computed token (tail slack)
  double fragmentation() const {
    return allocated_slots == 0 ? 0.0 : static_cast<double>(unused_slots) / allocated_slots;
  }
};

class Scheduler {
 public:
  // Preconditions: pool outlives the scheduler; tree (optional) uses the same pool and block
  // size; config fields >= 1.
  Scheduler(const SchedulerConfig& config, kv::BlockPool* pool, prefix::RadixTree* tree);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request (waiting). Errors: CheckAdmission's, or a duplicate id.
  Status Add(NewRequest r);
  // Knobs, from the next Schedule(). Preconditions: both >= 1.
  void SetLimits(int32_t max_batched_tokens, int32_t max_running);
  // Waiting requests of a priority class larger (less important) than `max_priority` are not
  // admitted while it holds (INT32_MAX: everyone).
  void SetAdmitPriorityLimit(int32_t max_priority);
  int32_t admit_priority_limit() const { return admit_priority_limit_; }

  // KV relief between steps (never between Schedule and Commit). Evicts unlocked cached-only
  // blocks (LRU) until at most `max_cached_blocks` remain; returns how many were evicted.
  int64_t EvictCachedBeyond(int32_t max_cached_blocks);
  // Preempts (recompute) every running request of a priority class larger than
  // `max_priority`; returns their ids, least important first.
  std::vector<int64_t> PreemptAbove(int32_t max_priority);

  // Builds the next step. Empty when nothing can run.
  SchedulerOutput Schedule();
  // The model has computed `out`'s tokens: advances each request and caches newly full blocks.
  // Preconditions: `out` is the latest Schedule() result, nothing finished since.
  void Commit(const SchedulerOutput& out);
  // Appends a sampled token to a running request. Preconditions: running, every known token
  // computed.
  void AppendToken(int64_t id, int32_t token);

  // Speculation. Before Schedule(): reserve n lookahead slots for a running request whose known
  // tokens are all computed but the last (a decode); Schedule() gives it 1 + n' tokens with
  // n' <= n as the budget allows. Requests in any other state ignore it. Reset by Schedule().
  void SetLookahead(int64_t id, int32_t n);
  // After Commit(): the draft token verified at position == tokens.size() was accepted; its K/V
  // (computed by the verify pass) becomes part of the sequence. Preconditions: as AppendToken.
  void AcceptDraftToken(int64_t id, int32_t token);
  // Returns blocks beyond what the computed tokens occupy (slots of rejected drafts).
  void TrimToComputed(int64_t id);
  // Sliding-window models (every layer sees only the last `window` positions): returns the
  // running request's blocks that hold only positions before computed - window + 1, which
  // no later query reads. Their block-table entries become kFreedBlock (the model never reads
  // them; Forward's precondition). A prefix the request had cached stays in the tree, no
  // longer locked (evictable); the request caches nothing more. Returns the number of blocks
  // released; 0 for an unknown or not running request. Preconditions: window >= 1.
  int32_t ReleaseOutsideWindow(int64_t id, int32_t window);
  static constexpr int32_t kFreedBlock = -1;
  // Running requests whose known tokens are all computed but the last (ready to decode).
  std::vector<int64_t> DecodeReady() const;
  // Removes a request in any state (finished or cancelled), returning all its blocks.
  // A finished request's full computed blocks stay cached (and pinned, for a session's
  // request). No-op for unknown ids.
  void Finish(int64_t id);
  // Sessions whose pinned prefix is held now; their pinned blocks under namespace ns.
  size_t num_sessions() const { return sessions_ ? sessions_->num_sessions() : 0; }
  int64_t session_blocks(uint64_t ns) const { return sessions_ ? sessions_->pinned_blocks(ns) : 0; }
  // The clock session TTLs are measured on (default: base/clock.h's NowSeconds).
  void SetClockForTesting(double (*now)()) { now_ = now; }

  bool Has(int64_t id) const { return reqs_.count(id) != 0; }
  RequestState state(int64_t id) const;
  int32_t num_output(int64_t id) const;
  // Prompt tokens found in the prefix cache when the request was first admitted.
  int32_t prefix_hit_tokens(int64_t id) const;
  // The request's prompt + output so far. Preconditions: Has(id).
  const std::vector<int32_t>& tokens(int64_t id) const;
  int32_t num_running() const { return num_running_.load(std::memory_order_relaxed); }
  int32_t num_waiting() const { return num_waiting_.load(std::memory_order_relaxed); }
  // The current knobs are config().max_batched_tokens and config().max_running.
  const SchedulerConfig& config() const { return config_; }
  SchedulerCounters counters() const;
  KvUsage Usage() const;

  // Pool and tree integrity, and every block's refcount == requests holding it + (1 if the
  // tree caches it); waiting requests hold nothing; running ones hold blocks covering what
  // they computed; the running cap holds (unless lowered since); the published counts and the
  // tail slack match a recount.
  Status CheckIntegrity() const;

 private:
  struct Req;
  // Orders requests: more important first (class, then arrival).
  static bool Before(const Req* a, const Req* b);
  bool EnsureBlocks(Req* r, int64_t tokens);
  bool AdmitPrefix(Req* r);
  void ReleaseAll(Req* r);
  void Preempt(Req* r, SchedulerOutput* out, int32_t* budget);
  // r's KV allocation threw: returns its blocks, parks it (waiting, never admitted again) and
  // lists it in out->failed.
  void FailAllocation(Req* r, SchedulerOutput* out);
  Req* PickVictim(const Req* requester) const;
  void CacheFullBlocks(Req* r);
  // Allocated-but-uncomputed token slots of a running request (0 for any other state).
  int64_t Slack(const Req* r) const;
  class SlackScope;  // keeps running_slack_ exact across one request's change
  void PublishCounts();

  // Single-writer counter readable from other threads.
  struct Count {
    std::atomic<int64_t> v{0};
    void Add(int64_t d) { v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed); }
    int64_t get() const { return v.load(std::memory_order_relaxed); }
  };

  SchedulerConfig config_;
  kv::BlockPool* pool_;
  prefix::RadixTree* tree_;
  std::unique_ptr<prefix::SessionPins> sessions_;  // with a tree; destroyed before it
  double (*now_)();
  std::unordered_map<int64_t, std::unique_ptr<Req>> reqs_;
  std::vector<Req*> running_;
  std::vector<Req*> waiting_;
  int64_t arrivals_ = 0;
  int32_t admit_priority_limit_ = INT32_MAX;
  int32_t running_bound_;  // the running cap CheckIntegrity holds: a lowered cap once it binds
  Count preemptions_, evicted_blocks_, prefix_queried_tokens_, prefix_hit_tokens_;
  Count sessions_released_, sessions_expired_;
  Count running_slack_;  // sum of Slack over running requests
  std::atomic<int32_t> num_running_{0}, num_waiting_{0};
};

}  // namespace tarmac::sched
