// ForwardBatch: the seam between the engine and the model. Tokens of several sequences, each
// with its position and the KV slot where its K/V is written; per sequence, the block table
// its attention reads. Plain data, built by the engine each step.
#pragma once

#include <cstdint>
#include <vector>

namespace tarmac::model {

struct ForwardBatch {
  // Per token, [n_tokens] each.
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;  // position in its sequence; attends to [0, position]
  std::vector<int32_t> seq;        // index into block_tables
  std::vector<int64_t> slots;      // KV slot = block * block_size + offset for this token
  // Per sequence: block ids covering positions [0, max position of its tokens].
  std::vector<std::vector<int32_t>> block_tables;
  // Tokens (indices into tokens) whose logits the caller wants, in output order.
  std::vector<int32_t> logits_for;
  // Token trees (speculative verification); all three empty when the batch has none. A tree
  // node sits in its sequence's KV at `positions` = tree_begin + its index in the tree
  // (parents before children), which bounds what it attends; it sees the keys before
  // tree_begin and, of the tree's, those whose bits are set in its tree_mask (bit j:
  // position tree_begin + j; its ancestors and itself: kernels::TreeMask). Its RoPE
  // position is rope_positions (the root's position + its depth: siblings share one).
  std::vector<uint64_t> tree_mask;       // [n_tokens]: 0 for tokens outside trees
  std::vector<int32_t> rope_positions;   // [n_tokens]
  std::vector<int32_t> tree_begin;       // [block_tables.size()]: -1 without a tree

  bool has_trees() const { return !tree_mask.empty(); }
  int32_t RopePosition(int32_t t) const { return rope_positions.empty() ? positions[t] : rope_positions[t]; }

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  void Clear() {
    tokens.clear();
    positions.clear();
    seq.clear();
    slots.clear();
    block_tables.clear();
    logits_for.clear();
    tree_mask.clear();
    rope_positions.clear();
    tree_begin.clear();
  }
};

}  // namespace tarmac::model
