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

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  void Clear() {
    tokens.clear();
    positions.clear();
    seq.clear();
    slots.clear();
    block_tables.clear();
    logits_for.clear();
  }
};

}  // namespace tarmac::model
