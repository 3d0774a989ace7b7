// SpecDriver: speculative decoding's part of an engine step, in three calls around the
// scheduler and the forward pass:
//   Draft (before Schedule): the proposer guesses tokens for the decode-ready requests that
//     allow it, in the shapes (chain or token tree, depth k) the policy picks per bucket, cut
//     where a request's grammar forbids a token; their lookahead is reserved in the scheduler.
//   FitTrees (after Schedule): each request's tree is laid out again within the draft slots it
//     got (the token budget may have cut its lookahead).
//   Verify (after the forward pass, per request): the target accepts the draft tokens it agrees
//     with (rejection sampling: the output keeps the target's distribution) plus one bonus or
//     replacement token, the tokens are emitted, and the proposer and the scheduler are rolled
//     back to what was computed.
//
// Owns: the proposer (null: speculation off; then Draft does nothing), the speculation policy
// and its measured step costs (the engine observes its decode steps there), and this step's
// drafts and trees (valid from one Draft to the next).
// Mutates: the scheduler (lookahead, accepted draft tokens, trims), the KV cache (an accepted
// sibling's K/V moves onto its path's position), the engine's speculation metrics, and through
// the SpecHost the requests' samplers, grammars and streams.
// Borrows the host, scheduler, KV cache, metrics and thread pool (they must outlive it).
// Thread-safety: policy().step_costs() may be read from any thread; everything else on the
// engine's step thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/engine_metrics.h"
#include "engine/engine_types.h"
#include "engine/grammar_constraint.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"
#include "speculative/proposer.h"
#include "speculative/spec_policy.h"
#include "speculative/token_tree.h"

namespace tarmac::engine {

// The engine's side of a live request, as speculation needs it (EngineCore implements it).
class SpecHost {
 public:
  struct Request {
    metrics::BucketId bucket = metrics::kNoBucket;
    bool speculative = false;  // the request allows drafts
    int32_t tokens_left = 0;   // output tokens it may still produce
    sampling::Sampler* sampler = nullptr;
    GrammarConstraint* grammar = nullptr;  // null: unconstrained
  };
  // Precondition: `id` is live. The pointers stay valid until the request finishes.
  virtual Request SpecRequest(int64_t id) = 0;
  // Records a token sampled or verified under the grammar's mask in the sampler and grammar.
  virtual void AcceptToken(int64_t id, int32_t token) = 0;
  // Emits a token already accepted into the sampler and the scheduler; true when that
  // finished the request (it is gone then).
  virtual bool Emit(int64_t id, sampling::SampleResult r, double now) = 0;
  // Finishes the request as stopped: its grammar admits no further token.
  virtual void FinishByGrammar(int64_t id) = 0;

 protected:
  ~SpecHost() = default;
};

class SpecDriver {
 public:
  // Creates the proposer the config asks for: a draft model (on `threads`), n-gram lookup, or
  // none. Errors: the draft model's (e.g. a vocabulary other than the target's).
  static Result<std::unique_ptr<SpecDriver>> Create(const SpeculationConfig& config,
                                                    const model::ModelConfig& target,
                                                    const sched::SchedulerConfig& sched_config,
                                                    ThreadPool* threads, SpecHost* host,
                                                    sched::Scheduler* sched, model::KvCache* cache,
                                                    EngineMetrics* metrics);

  // Drafts for this step (the previous step's drafts are dropped first), within the knobs
  // (speculation on/off, k caps per bucket).
  void Draft(const EngineKnobs& knobs);
  // Lays each drafted request's tree out again within the slots it was scheduled.
  void FitTrees(std::span<const sched::ScheduledSeq> seqs);
  // The tree of a request scheduled with num_draft > 0 (after FitTrees).
  const speculative::TokenTree* Tree(int64_t id) const { return &trees_.at(id).tree; }
  // Verifies the request's draft tree against rows [0, tree size] of logits (the last known
  // token's first, then one per node) and emits what comes out. block_table: the request's.
  // Precondition: it was scheduled with num_draft > 0 this step and its pass succeeded.
  void Verify(int64_t id, float* logits, const std::vector<int32_t>& block_table, double now);

  // The request finished or was preempted: the proposer frees its state.
  void Release(int64_t id) {
    if (proposer_) proposer_->Release(id);
  }
  Status CheckIntegrity() const { return proposer_ ? proposer_->CheckIntegrity() : Status::Ok(); }
  speculative::SpecPolicy& policy() { return policy_; }
  const speculative::SpecPolicy& policy() const { return policy_; }

 private:
  SpecDriver(const SpeculationConfig& config, int32_t n_vocab, SpecHost* host, sched::Scheduler* sched,
             model::KvCache* cache, EngineMetrics* metrics);
  // The largest k the knobs allow for a bucket.
  static int32_t KCap(const EngineKnobs& knobs, metrics::BucketId b);
  // Cuts each constrained request's drafts where its grammar forbids a token.
  void CheckDraftsAgainstGrammars(std::span<const speculative::ProposeRequest> reqs,
                                  std::vector<std::vector<sampling::DraftToken>>* drafts);

  SpeculationConfig config_;
  int32_t n_vocab_;  // the target's
  SpecHost* host_;
  sched::Scheduler* sched_;
  model::KvCache* cache_;
  EngineMetrics* metrics_;
  std::unique_ptr<speculative::Proposer> proposer_;  // null: no speculation
  speculative::SpecPolicy policy_;
  bool trees_ok_ = false;  // the proposer gives siblings and the model has no sliding window
  std::unordered_map<int64_t, std::vector<sampling::DraftToken>> drafts_;  // this step's
  struct Planned {
    speculative::TreeShape shape;
    speculative::TokenTree tree;  // laid out after Schedule (within the slots it got)
  };
  std::unordered_map<int64_t, Planned> trees_;  // this step's, beside drafts_
};

}  // namespace tarmac::engine
