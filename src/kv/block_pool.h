// BlockPool: hands out fixed-size KV blocks by id, with reference counts (a block shared by
// several requests through the prefix cache is freed only when the last holder releases it).
//
// Owns only bookkeeping (the KV bytes live in KvCache, indexed by block id). Allocate/Ref/
// Release are O(1). Not thread-safe: one engine step thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"

namespace tarmac::kv {

class BlockPool {
 public:
  // Preconditions: num_blocks >= 1 (asserted).
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }

  // A free block with refcount 1, or nullopt when none is left.
  std::optional<int32_t> Allocate();
  // Adds a holder. Preconditions: block is allocated.
  void Ref(int32_t block);
  // Drops a holder; the block returns to the free list at zero. Preconditions: allocated.
  void Release(int32_t block);
  int32_t refcount(int32_t block) const { return refcount_[block]; }

  // Free list and refcounts agree: every block is either free (refcount 0, listed once) or
  // allocated (refcount > 0, not listed).
  Status CheckIntegrity() const;

 private:
  std::vector<int32_t> refcount_;  // [num_blocks]
  std::vector<int32_t> free_;      // stack of free block ids
};

}  // namespace tarmac::kv
