// DraftModelProposer: a small model with the target's vocabulary drafts k tokens per request,
// for many requests in one batched forward per draft position. It keeps its own paged KV
// (own block pool, one block table per request) and remembers how far each request's tokens
// are computed, so each step only feeds what is new (the accepted tokens) before drafting.
//
// Owns its KV cache, block pool, thread pool and per-request state; borrows the model. Not
// thread-safe (the engine's step thread).
#pragma once

#include <memory>
#include <unordered_map>

#include "base/thread_pool.h"
#include "kv/block_pool.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "speculative/proposer.h"

namespace tarmac::speculative {

class DraftModelProposer : public Proposer {
 public:
  // Errors when the vocabularies differ. context: tokens per request at most; max_seqs:
  // requests drafting at once (KV is sized for max_seqs full contexts). pool: the threads the
  // draft forward runs on, normally the target engine's own (the draft and the target run
  // one after the other on the step thread; a second pool's spinning workers would compete
  // with the target's for the cores). Must outlive the proposer.
  static Result<std::unique_ptr<DraftModelProposer>> Create(model::LlamaModel* draft,
                                                            int32_t target_vocab,
                                                            int32_t context, int32_t max_seqs,
                                                            ThreadPool* pool);
  const char* name() const override { return "draft"; }
  void Propose(std::span<const ProposeRequest> requests,
               std::vector<std::vector<sampling::DraftToken>>* drafts) override;
  void Rollback(int64_t id, int32_t valid_len) override;
  void Release(int64_t id) override;
  bool SteadyRounds(int32_t* rounds, double* seconds) const override {
    *rounds = steady_rounds_;
    *seconds = steady_seconds_;
    return true;
  }
  // Pool integrity; every request's blocks are held once and cover what it computed.
  Status CheckIntegrity() const override;

 private:
  struct Seq {
    std::vector<int32_t> blocks;  // block table in the draft's KV
    int32_t computed = 0;         // leading tokens whose draft K/V is valid
    uint64_t rounds = 0;          // Propose rounds so far (seeds the draft's RNG)
  };
  DraftModelProposer(model::LlamaModel* draft, int32_t context, const model::KvShape& shape,
                     ThreadPool* pool);
  bool Ensure(Seq* s, int32_t tokens);
  void Trim(Seq* s);
  void AddToken(int32_t seq_index, const Seq& s, int32_t token, int32_t pos);

  model::LlamaModel* model_;
  int32_t context_;
  ThreadPool* threads_;  // not owned
  model::KvCache cache_;
  kv::BlockPool pool_;
  std::unordered_map<int64_t, Seq> seqs_;
  model::ForwardBatch batch_;
  std::vector<float> logits_;
  int32_t steady_rounds_ = 0;  // of the last Propose (see Proposer::SteadyRounds)
  double steady_seconds_ = 0;
};

}  // namespace tarmac::speculative
