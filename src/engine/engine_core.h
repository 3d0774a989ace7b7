// EngineCore: one model's serving loop body, synchronous. Each Step() asks the scheduler for a
// batch, runs one forward pass over it (paged KV, ragged batch), samples a token for every
// request that finished its known tokens (or verifies its drafts), and streams events.
// EngineClient runs Step() on its own thread; tests drive it directly.
//
// Requests come in through Validate (every check of a request lives there or in the
// owners it calls: SamplingParams::Validate, sched::CheckAdmission) and Add; a ValidRequest is
// the proof that the checks ran, so Add never checks again.
//
// Owns the KV cache, block pool, prefix tree, scheduler, thread pool, the speculation driver
// (proposer and policy: engine/spec_driver.h), the engine's metric series, the model's
// compiled grammars (GrammarCache) and per-request state (sampler, grammar constraint,
// detokenizer, stop matcher, timings). A constrained request's logits are masked by its
// grammar before sampling and before verifying drafts (which are first cut where the grammar
// forbids a token); free requests in the same step are untouched.
// Borrows the model and tokenizer (must outlive it; the tokenizer may be null: no text, no stop
// strings, no end-of-generation detection).
// Thread-safety: Validate, Stats, DrainEvents, metrics(), config(), kv_bytes(), grammars() and
// num_blocks() may be called from any thread; everything else (Add, Cancel, Step, SetKnobs,
// CheckIntegrity, ...) from one thread, the step thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/cache_events.h"
#include "engine/engine_config.h"
#include "engine/engine_metrics.h"
#include "engine/engine_types.h"
#include "engine/forward_batch_builder.h"
#include "engine/grammar_cache.h"
#include "engine/grammar_constraint.h"
#include "engine/request_stream.h"
#include "engine/spec_driver.h"
#include "engine/stop_matcher.h"
#include "kv/block_pool.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "prefix/radix_tree.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tarmac::engine {

class EngineCore : private SpecHost {
 public:
  // Resolves the config (ResolveEngineConfig) and sizes the KV cache from it (errors name the
  // field, e.g. a budget too small for one full context).
  static Result<std::unique_ptr<EngineCore>> Create(model::LlamaModel* model,
                                                    const tok::Tokenizer* tokenizer,
                                                    const EngineConfig& config);
  ~EngineCore();

  // Every check of a request: sampling parameters, token ids (prompt, stop_token_ids,
  // logit_bias), stop strings, and that it can ever fit (context and KV pool). Errors carry
  // the field. Sets the request's bucket when unset. Thread-safe.
  Result<ValidRequest> Validate(EngineRequest r) const;
  // Queues a request under `id` (unique); its events go to `stream`. submitted_s: when the
  // caller accepted it (base/clock.h NowSeconds), so its queue time and TTFT include a wait
  // before it reached the core (EngineClient's inbox, behind the step in progress); < 0: now.
  // Preconditions: `r` was validated by this engine; submitted_s <= now.
  void Add(int64_t id, ValidRequest r, std::shared_ptr<RequestStream> stream, double submitted_s = -1);
  // Validate, then Add (nothing queued on error).
  Status Add(int64_t id, EngineRequest r, std::shared_ptr<RequestStream> stream);
  // Ends a request in any state with FinishReason::kCancelled; every block it held returns.
  // No-op for unknown (already finished) ids.
  void Cancel(int64_t id);
  // Fails every live request with `error` (shutdown).
  void AbortAll(const Status& error);
  // The last resort after the step loop died (the scheduler may be inconsistent): ends every
  // live request's stream with `error` without touching the scheduler; only destruction may
  // follow.
  void AbandonAll(const Status& error);

  // One engine step. Returns false when there was nothing to run.
  // Faults: an exception or a failed TARMAC_CHECK while processing one request (sampling,
  // detokenizing, its forward pass, allocating its KV) fails that request (FinishReason::kError,
  // an Internal status naming what broke; logged) and returns its blocks; the others go on
  // (a failed batched forward pass is rerun one sequence at a time to find the culprit). After
  // such a failure CheckIntegrity runs; anything thrown outside a request's processing, or a
  // failed integrity check then, leaves Step as an exception: the engine must not go on.
  bool Step();
  // The model's throwaway passes (LlamaModel::Warmup) on this engine's pool and KV dtype;
  // call from the step thread. Touches no request, block, counter or cache entry.
  void Warmup();
  bool idle() const { return active_.empty(); }

  // Knobs: checked against the config (errors name the knob); applied by SetKnobs at once, so
  // call it between steps.
  Status CheckKnobs(const EngineKnobs& k) const;
  void SetKnobs(const EngineKnobs& k);
  const EngineKnobs& knobs() const { return knobs_; }
  // The knobs the config implies (the engine starts with these).
  EngineKnobs DefaultKnobs() const;

  // Thread-safe, O(1): counters and occupancy read from atomics.
  EngineStats Stats() const;
  // Up to `max` of the oldest undrained prefix-cache events (config().event_capacity > 0).
  // Thread-safe.
  std::vector<prefix::BlockEvent> DrainEvents(size_t max = SIZE_MAX);
  const EngineMetrics& metrics() const { return *metrics_; }
  // Measured step costs (seconds against tokens in the step): decode steps (plain decodes and
  // verifications; the speculation policy's) and steps that carry prefill. Thread-safe.
  const metrics::CostCurve& decode_costs() const { return spec_->policy().step_costs(); }
  const metrics::CostCurve& prefill_costs() const { return prefill_costs_; }
  // Scheduler (pool, tree, refcounts) and the draft proposer's KV.
  Status CheckIntegrity() const;
  // Hashes of the blocks the prefix cache holds now (tests of the event stream). Step thread.
  std::vector<uint64_t> CachedBlockHashes() const;
  const EngineConfig& config() const { return config_; }  // resolved (KV blocks filled in)
  int32_t num_blocks() const { return pool_->num_blocks(); }
  int64_t kv_bytes() const;
  // Grammars compiled for this engine's vocabulary (requests' EngineRequest::grammar); null
  // without a tokenizer. Thread-safe.
  GrammarCache* grammars() const { return grammars_.get(); }

 private:
  // The engine's state of one live request.
  struct ActiveRequest {
    EngineRequest req;
    std::shared_ptr<RequestStream> stream;
    std::unique_ptr<sampling::Sampler> sampler;
    std::unique_ptr<GrammarConstraint> grammar;  // null: unconstrained
    std::vector<sampling::SampleResult> prompt_lp;  // prompt logprobs captured, not yet sent
    int32_t prompt_lp_next = 1;                     // next prompt position to capture
    std::unique_ptr<tok::StreamDetokenizer> detok;
    std::unique_ptr<StopMatcher> stop;
    double submit_s = 0, first_sched_s = 0, first_token_s = 0, last_token_s = 0;
    RequestMetrics metrics;
  };

  EngineCore(model::LlamaModel* model, const tok::Tokenizer* tokenizer, const EngineConfig& config,
             const model::KvShape& shape);
  // Emits a token already accepted into the sampler and the scheduler: timings, text, stop
  // checks; finishes the request when it ends it. Returns true when the request finished.
  bool Emit(int64_t id, sampling::SampleResult r, double now) override;
  // The rest of SpecHost: the speculation driver's view of active_.
  Request SpecRequest(int64_t id) override;
  void AcceptToken(int64_t id, int32_t token) override { Accept(active_.at(id), token); }
  void FinishByGrammar(int64_t id) override { FinishRequest(id, FinishReason::kStop, TokenEvent{}, Status::Ok()); }
  void Sample(int64_t id, std::span<float> logits, double now);
  // Records a sampled or verified token in the request's sampler and grammar.
  static void Accept(ActiveRequest& a, int32_t token);
  // Logprobs of the prompt tokens following positions [first, first + n) from n logits rows.
  void CapturePromptLogprobs(int64_t id, int32_t first, int32_t n, const float* rows);
  // The KV relief knobs (max_cached_blocks, preempt_above_priority), before a step.
  void ApplyKvRelief();
  void FinishRequest(int64_t id, FinishReason reason, TokenEvent ev, const Status& error);
  // One request's processing failed (`what`): logs it and finishes it with an Internal error
  // (no-op but the log when it finished already).
  void FailRequest(int64_t id, const std::string& what);
  // Test aid: throws (or fails a check) when the request asked for the fault `where`.
  void InjectFault(const ActiveRequest& a, InjectedFault where) const;
  // Test aid: throws when a scheduled request asked for the fault 'engine' (a step that
  // fails outside any request's processing).
  void InjectStepFault(const sched::SchedulerOutput& out) const;
  void ForwardHook(const sched::SchedulerOutput& out, size_t begin, size_t end) const;
  // The step's forward pass; a failed batch is rerun one sequence at a time. Per sequence of
  // out: "" or why its pass failed.
  std::vector<std::string> Forward(const sched::SchedulerOutput& out);
  // Step's parts. The scheduler's batch (preempted requests counted, failed ones failed).
  sched::SchedulerOutput ScheduleStep();
  // Fits the drafts' trees into their slots and builds batch_ and rows_ (first_sched_s set
  // to t0 where unset). Returns the prefill tokens (BuildForwardBatch).
  int32_t BuildBatch(const sched::SchedulerOutput& out, double t0);
  // Forward, timed into the decode or the prefill step costs.
  std::vector<std::string> RunForward(const sched::SchedulerOutput& out, int32_t prefill_tokens,
                                      double* forward_s);
  // Sliding-window models: KV blocks that no layer reads again go back to the pool.
  void ReleaseOutsideWindow(const sched::SchedulerOutput& out, const std::vector<std::string>& failed);
  // Captures prompt logprobs, then samples or verifies (SpecDriver) each sequence whose pass
  // worked and that finished its known tokens. Returns whether any verified drafts.
  bool SampleAndVerify(const sched::SchedulerOutput& out, const std::vector<std::string>& failed);
  // Commits the sequences whose pass worked, then fails the others.
  void CommitAndFail(const sched::SchedulerOutput& out, const std::vector<std::string>& failed);
  // After a step in which requests failed: CheckIntegrity, throwing when it fails.
  void CheckAfterFaults() const;
  // Moves the tree's events to the queue and tells on_events. After events were dropped the
  // stream restarts (cleared, then every cached block) once the queue has room for it all.
  void PublishEvents();

  model::LlamaModel* model_;
  const tok::Tokenizer* tok_;
  EngineConfig config_;
  ThreadPool pool_threads_;
  model::KvCache cache_;
  std::unique_ptr<kv::BlockPool> pool_;
  std::unique_ptr<prefix::RadixTree> tree_;
  std::unique_ptr<sched::Scheduler> sched_;
  std::unordered_map<int64_t, ActiveRequest> active_;
  std::unique_ptr<SpecDriver> spec_;  // set by Create; borrows pool_threads_, sched_, cache_, metrics_
  metrics::CostCurve prefill_costs_;
  EngineKnobs knobs_;
  model::ForwardBatch batch_;
  std::vector<BatchSeq> batch_seqs_;  // scratch: BuildForwardBatch's per-sequence input
  int32_t step_faults_ = 0;  // requests failed in this step
  std::vector<SeqRows> rows_;  // this step's, per scheduled sequence (rows of logits_)
  std::vector<float> logits_;
  std::unique_ptr<GrammarCache> grammars_;
  std::vector<prefix::BlockEvent> step_events_;  // scratch: this step's, on their way out
  std::unique_ptr<CacheEventQueue> events_;      // null: events off
  bool resync_ = false;  // events were dropped: the stream must restart
  std::atomic<int32_t> max_concurrent_{0};
  std::unique_ptr<EngineMetrics> metrics_;  // last: its callbacks read the scheduler
};

}  // namespace tarmac::engine
