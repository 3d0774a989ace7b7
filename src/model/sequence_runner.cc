#include "model/sequence_runner.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"
#include "tensor/kv_layout.h"

namespace tarmac::model {
namespace {
KvShape ShapeFor(const ModelConfig& c, int32_t context_len, KvDtype dtype) {
  return KvShape{c.n_layer, c.n_head_kv, c.head_dim, kDefaultBlockSize,
                 static_cast<int32_t>(BlocksFor(context_len, kDefaultBlockSize)), dtype};
}
}  // namespace

SequenceRunner::SequenceRunner(LlamaModel* model, int32_t context_len, ThreadPool* pool,
                               int32_t max_chunk, KvDtype kv_dtype)
    : model_(model), pool_(pool), context_len_(context_len), max_chunk_(max_chunk),
      cache_(ShapeFor(model->config(), context_len, kv_dtype)) {
  TARMAC_CHECK(context_len >= 1 && max_chunk >= 1);
  batch_.block_tables.resize(1);
  batch_.block_tables[0].resize(cache_.shape().num_blocks);
  std::iota(batch_.block_tables[0].begin(), batch_.block_tables[0].end(), 0);
}

Status SequenceRunner::Append(std::span<const int32_t> tokens, bool all_logits,
                              std::vector<float>* logits) {
  const int32_t n_vocab = model_->config().n_vocab;
  if (static_cast<int64_t>(n_past_) + static_cast<int64_t>(tokens.size()) > context_len_) {
    return InvalidArgument("sequence of {} tokens exceeds the context of {}",
                           static_cast<int64_t>(n_past_) + static_cast<int64_t>(tokens.size()),
                           context_len_);
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) return InvalidArgument("token id {} is outside the vocabulary of {}", t, n_vocab);
  }
  // One chunk (every decode step): the forward writes the caller's logits in place, whose
  // rows are already the right size from the last step, instead of a copy of a vocabulary row.
  const bool one_chunk = !tokens.empty() && tokens.size() <= static_cast<size_t>(max_chunk_);
  if (!one_chunk) logits->clear();
  for (size_t start = 0; start < tokens.size(); start += max_chunk_) {
    const size_t end = std::min(tokens.size(), start + static_cast<size_t>(max_chunk_));
    const bool last_chunk = end == tokens.size();
    auto table = std::move(batch_.block_tables[0]);
    batch_.Clear();
    batch_.block_tables.push_back(std::move(table));
    for (size_t i = start; i < end; ++i) {
      const int32_t pos = n_past_ + static_cast<int32_t>(i - start);
      if (all_logits || (last_chunk && i + 1 == end)) batch_.logits_for.push_back(static_cast<int32_t>(i - start));
      batch_.tokens.push_back(tokens[i]);
      batch_.positions.push_back(pos);
      batch_.seq.push_back(0);
      batch_.slots.push_back(pos);  // identity block table: slot == position
    }
    model_->Forward(batch_, &cache_, pool_, one_chunk ? logits : &chunk_logits_);
    if (!one_chunk) logits->insert(logits->end(), chunk_logits_.begin(), chunk_logits_.end());
    n_past_ += static_cast<int32_t>(end - start);
  }
  return Status::Ok();
}

}  // namespace tarmac::model
