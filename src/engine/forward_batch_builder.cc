#include "engine/forward_batch_builder.h"

#include "base/check.h"
#include "tensor/kv_layout.h"

namespace tarmac::engine {

int32_t BuildForwardBatch(std::span<const sched::ScheduledSeq> seqs, std::span<const BatchSeq> extra,
                          int32_t block_size, model::ForwardBatch* batch, std::vector<SeqRows>* rows) {
  TARMAC_CHECK(extra.size() == seqs.size());
  batch->Clear();
  batch->block_tables.resize(seqs.size());
  rows->assign(seqs.size(), SeqRows{});
  // Tree positions and masks go with the batch only when some sequence has siblings.
  bool any_tree = false;
  for (const BatchSeq& e : extra) any_tree = any_tree || (e.tree != nullptr && e.tree->size() > e.tree->spine);
  if (any_tree) batch->tree_begin.assign(seqs.size(), -1);
  int32_t prefill_tokens = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const sched::ScheduledSeq& s = seqs[i];
    const BatchSeq& e = extra[i];
    SeqRows& r = (*rows)[i];
    batch->block_tables[i] = *s.block_table;
    const std::vector<int32_t>& table = batch->block_tables[i];
    const int32_t known = s.num_tokens - s.num_draft;
    const speculative::TokenTree* tree = e.tree;
    const bool is_tree = tree != nullptr && tree->size() > tree->spine;
    if (is_tree) batch->tree_begin[i] = s.start + known;
    const int32_t feed = known + (tree != nullptr ? tree->size() : 0);
    r.begin = static_cast<int32_t>(batch->logits_for.size());
    r.first_token = batch->n_tokens();
    for (int32_t t = 0; t < feed; ++t) {
      const int32_t pos = s.start + t;
      batch->tokens.push_back(t < known ? (*s.tokens)[pos] : tree->token[t - known]);
      batch->positions.push_back(pos);
      batch->seq.push_back(static_cast<int32_t>(i));
      batch->slots.push_back(SlotOf(table, pos, block_size));
      if (any_tree) {
        // A node's RoPE position is the root's plus its depth; its mask, its ancestors.
        const bool node = is_tree && t >= known;
        batch->rope_positions.push_back(node ? s.start + known - 1 + tree->depth[t - known] : pos);
        batch->tree_mask.push_back(node ? tree->mask[t - known] : 0);
      }
      if (e.prompt_logprobs >= 0 && pos + 1 < e.prompt_len && pos + 1 >= e.prompt_lp_next) {
        batch->logits_for.push_back(batch->n_tokens() - 1);
        ++r.prompt;
      } else if (s.sample && t >= known - 1) {
        batch->logits_for.push_back(batch->n_tokens() - 1);
      }
    }
    r.count = static_cast<int32_t>(batch->logits_for.size()) - r.begin;
    const bool decode = s.num_draft > 0 || (s.num_tokens == 1 && s.sample && s.start >= e.prompt_len);
    if (!decode) prefill_tokens += s.num_tokens;
  }
  return prefill_tokens;
}

}  // namespace tarmac::engine
