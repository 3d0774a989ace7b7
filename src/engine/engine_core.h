// EngineCore: one model's serving loop body, synchronous. Each Step() asks the scheduler for a
// batch, runs one forward pass over it (paged KV, ragged batch), samples a token for every
// request that finished its known tokens, and streams events. EngineClient runs Step() on its
// own thread; tests drive it directly.
//
// Owns the KV cache, block pool, prefix tree, scheduler, thread pool and per-request state
// (sampler, detokenizer, stop matcher, timings). Borrows the model and tokenizer (must outlive
// it; the tokenizer may be null: no text, no stop strings, no end-of-generation detection).
// Not thread-safe: one thread calls everything.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/engine_types.h"
#include "engine/request_stream.h"
#include "engine/stop_matcher.h"
#include "kv/block_pool.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "prefix/radix_tree.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"
#include "speculative/proposer.h"
#include "speculative/spec_policy.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tarmac::engine {

class EngineCore {
 public:
  // Sizes the KV cache from the config (errors name the flag-level problem, e.g. a budget too
  // small for one full context).
  static Result<std::unique_ptr<EngineCore>> Create(model::LlamaModel* model,
                                                    const tok::Tokenizer* tokenizer,
                                                    const EngineConfig& config);
  ~EngineCore();

  // Checks a request without queuing it: sampling parameters, token ids, max_tokens, and that
  // it can ever fit (context and KV pool). Thread-safe (reads immutable state only).
  Status Validate(const EngineRequest& r) const;
  // Queues a request under `id` (unique); its events go to `stream`.
  // Preconditions: Validate(r).ok().
  void Add(int64_t id, EngineRequest r, std::shared_ptr<RequestStream> stream);
  // Ends a request in any state with FinishReason::kCancelled; every block it held returns.
  // No-op for unknown (already finished) ids.
  void Cancel(int64_t id);
  // Fails every live request with `error` (shutdown).
  void AbortAll(const Status& error);

  // One engine step. Returns false when there was nothing to run.
  bool Step();
  // The model's throwaway passes (LlamaModel::Warmup) on this engine's pool and KV dtype;
  // call from the step thread. Touches no request, block, counter or cache entry.
  void Warmup();
  bool idle() const { return reqs_.empty(); }

  EngineStats Stats() const;
  // Scheduler (pool, tree, refcounts) and the draft proposer's KV.
  Status CheckIntegrity() const;
  const EngineConfig& config() const { return config_; }  // with derived fields filled in
  int32_t num_blocks() const { return pool_->num_blocks(); }
  int64_t kv_bytes() const;

 private:
  struct Live {
    EngineRequest req;
    std::shared_ptr<RequestStream> stream;
    std::unique_ptr<sampling::Sampler> sampler;
    std::unique_ptr<tok::StreamDetokenizer> detok;
    std::unique_ptr<StopMatcher> stop;
    double submit_s = 0, first_sched_s = 0, first_token_s = 0, last_token_s = 0;
    RequestMetrics metrics;
    std::string bucket;  // speculation bucket
  };

  EngineCore(model::LlamaModel* model, const tok::Tokenizer* tokenizer, const EngineConfig& config,
             const model::KvShape& shape);
  // Emits a token already accepted into the sampler and the scheduler: timings, text, stop
  // checks; finishes the request when it ends it. Returns true when the request finished.
  bool Emit(int64_t id, sampling::SampleResult r, double now);
  void Sample(int64_t id, std::span<float> logits, double now);
  // Verifies num_draft drafts against rows [0, num_draft] of logits (one row per position,
  // the last known token's first) and emits what comes out.
  void Verify(int64_t id, float* logits, int32_t num_draft, double now);
  // Asks the proposer for drafts for decode-ready requests and reserves their lookahead.
  void Draft();
  static std::string BucketOf(const EngineRequest& r);
  void FinishRequest(int64_t id, FinishReason reason, TokenEvent ev, const Status& error);

  model::LlamaModel* model_;
  const tok::Tokenizer* tok_;
  EngineConfig config_;
  ThreadPool pool_threads_;
  model::KvCache cache_;
  std::unique_ptr<kv::BlockPool> pool_;
  std::unique_ptr<prefix::RadixTree> tree_;
  std::unique_ptr<sched::Scheduler> sched_;
  std::unordered_map<int64_t, Live> reqs_;
  std::unique_ptr<speculative::Proposer> proposer_;  // null: no speculation
  speculative::SpecPolicy policy_;
  std::unordered_map<int64_t, std::vector<sampling::DraftToken>> drafts_;  // this step's
  model::ForwardBatch batch_;
  std::vector<float> logits_;
  EngineStats stats_;
};

}  // namespace tarmac::engine
