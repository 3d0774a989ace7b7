// BlockPool: hands out fixed-size KV blocks by id, with reference counts (a block shared by
// several requests through the prefix cache is freed only when the last holder releases it).
// A reference is held either by a request or by the prefix cache (Holder), so the pool knows,
// in O(1), how many blocks requests hold and how many only the cache holds.
//
// Owns only bookkeeping (the KV bytes live in KvCache, indexed by block id). Allocate/Ref/
// Release are O(1). Not thread-safe for mutation: one engine step thread owns it. The
// occupancy counts (num_free, num_request_held, num_cache_only) may be read from any thread
// (single-writer atomics: each value whole, not a snapshot of all three).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"

namespace tarmac::kv {

enum class Holder : uint8_t { kRequest, kCache };

class BlockPool {
 public:
  // Preconditions: num_blocks >= 1 (asserted).
  explicit BlockPool(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(refcount_.size()); }
  int32_t num_free() const { return num_free_.load(std::memory_order_relaxed); }
  int32_t num_used() const { return num_blocks() - num_free(); }
  // Blocks with at least one request reference.
  int32_t num_request_held() const { return request_held_.load(std::memory_order_relaxed); }
  // Blocks held only by the prefix cache (evictable). Never negative.
  int32_t num_cache_only() const;

  // A free block with one request reference, or nullopt when none is left.
  std::optional<int32_t> Allocate();
  // Adds a holder. Preconditions: block is allocated; a block has at most one cache reference.
  void Ref(int32_t block, Holder h = Holder::kRequest);
  // Drops a holder; the block returns to the free list at zero. Preconditions: `h` holds it.
  void Release(int32_t block, Holder h = Holder::kRequest);
  int32_t refcount(int32_t block) const { return refcount_[block]; }
  bool cached(int32_t block) const { return cache_ref_[block] != 0; }

  // Free list and refcounts agree: every block is either free (refcount 0, listed once) or
  // allocated (refcount > 0, not listed); cache references <= 1 per block and <= refcount;
  // the occupancy counts match a recount.
  Status CheckIntegrity() const;

 private:
  void Publish();  // after a change: the free count for readers on other threads

  std::vector<int32_t> refcount_;   // [num_blocks] all holders
  std::vector<uint8_t> cache_ref_;  // [num_blocks] 1 when the prefix cache holds it
  std::vector<int32_t> free_;       // stack of free block ids
  std::atomic<int32_t> num_free_{0};
  std::atomic<int32_t> request_held_{0};
};

}  // namespace tarmac::kv
