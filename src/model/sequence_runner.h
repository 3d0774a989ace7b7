// SequenceRunner: runs one sequence through a model with its own KV cache, for the CLI tools
// (generate, perplexity, bench) that need no scheduler. The engine does the same for many
// sequences at once with shared blocks.
//
// Owns the KV cache (context_len tokens, identity block table) and the batch/logit buffers.
// Not thread-safe; the model and pool are borrowed and must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"

namespace tarmac::model {

class SequenceRunner {
 public:
  // Preconditions: context_len >= 1; max_chunk >= 1 (prefill batch size in tokens).
  SequenceRunner(LlamaModel* model, int32_t context_len, ThreadPool* pool,
                 int32_t max_chunk = 512, KvDtype kv_dtype = KvDtype::kF16);

  // Runs `tokens` after what is already in the cache, in chunks of at most max_chunk tokens.
  // logits: with all_logits, [tokens.size()][n_vocab]; otherwise the last token's [n_vocab].
  // Returns an error (and runs nothing) when the sequence would exceed the context.
  Status Append(std::span<const int32_t> tokens, bool all_logits, std::vector<float>* logits);

  int32_t size() const { return n_past_; }
  int32_t context_len() const { return context_len_; }
  // Bytes of the KV cache this runner reserved.
  int64_t kv_bytes() const { return cache_.shape().BytesPerBlock() * cache_.shape().num_blocks; }
  // Forgets the sequence (the cache is reused).
  void Reset() { n_past_ = 0; }

 private:
  LlamaModel* model_;
  ThreadPool* pool_;
  int32_t context_len_;
  int32_t max_chunk_;
  int32_t n_past_ = 0;
  KvCache cache_;
  ForwardBatch batch_;
  std::vector<float> chunk_logits_;
};

}  // namespace tarmac::model
