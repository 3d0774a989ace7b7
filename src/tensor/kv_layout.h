// The paged KV cache's arithmetic, in one place: the default block size and how positions map
// to blocks and slots. A sequence's K/V lives in fixed-size blocks listed by its block table;
// position p sits in block block_table[p / block_size] at offset p % block_size, and that
// block's first slot is block * block_size (KvCache addresses tokens by slot; ForwardBatch
// carries one slot per token).
//
// Here, in tensor, because the model's KV cache lays its buffers out this way and the scheduler,
// which must never see model code, allocates the blocks: the lowest module both may include.
// Header-only integer arithmetic.
#pragma once

#include <cstdint>
#include <span>

#include "base/check.h"

namespace tarmac {

// Tokens per KV block where no one chose otherwise: the engine's --block-size default, the
// draft model's cache, the single-sequence runner's and the warm-up's.
inline constexpr int32_t kDefaultBlockSize = 16;

// Blocks needed to hold `tokens` tokens: ceil(tokens / block_size).
// Preconditions: tokens >= 0, block_size >= 1.
constexpr int64_t BlocksFor(int64_t tokens, int32_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

// The KV slot of position `pos` of a sequence whose blocks are `block_table`.
// Preconditions: pos >= 0 and block_table covers it (pos / block_size < its size).
inline int64_t SlotOf(std::span<const int32_t> block_table, int32_t pos, int32_t block_size) {
  TARMAC_DCHECK(pos >= 0 && static_cast<size_t>(pos / block_size) < block_table.size());
  return static_cast<int64_t>(block_table[static_cast<size_t>(pos / block_size)]) * block_size +
         pos % block_size;
}

}  // namespace tarmac
