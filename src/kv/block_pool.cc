#include "kv/block_pool.h"

#include <algorithm>

#include "base/check.h"

namespace tarmac::kv {

BlockPool::BlockPool(int32_t num_blocks) {
  TARMAC_CHECK(num_blocks >= 1);
  refcount_.assign(num_blocks, 0);
  cache_ref_.assign(num_blocks, 0);
  free_.reserve(num_blocks);
  // Low ids on top of the stack so a fresh pool hands out 0, 1, 2, ...
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  Publish();
}

void BlockPool::Publish() { num_free_.store(static_cast<int32_t>(free_.size()), std::memory_order_relaxed); }

int32_t BlockPool::num_cache_only() const {
  return std::max(0, num_used() - num_request_held());
}

std::optional<int32_t> BlockPool::Allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  TARMAC_DCHECK(refcount_[b] == 0 && cache_ref_[b] == 0);
  refcount_[b] = 1;
  request_held_.fetch_add(1, std::memory_order_relaxed);
  Publish();
  return b;
}

void BlockPool::Ref(int32_t block, Holder h) {
  TARMAC_CHECK(block >= 0 && block < num_blocks() && refcount_[block] > 0);
  if (h == Holder::kCache) {
    TARMAC_CHECK(cache_ref_[block] == 0);
    cache_ref_[block] = 1;
  } else if (refcount_[block] == cache_ref_[block]) {
    request_held_.fetch_add(1, std::memory_order_relaxed);  // its first request holder
  }
  ++refcount_[block];
}

void BlockPool::Release(int32_t block, Holder h) {
  TARMAC_CHECK(block >= 0 && block < num_blocks() && refcount_[block] > 0);
  if (h == Holder::kCache) {
    TARMAC_CHECK(cache_ref_[block] == 1);
    cache_ref_[block] = 0;
  } else {
    TARMAC_CHECK(refcount_[block] > cache_ref_[block]);
    if (refcount_[block] - cache_ref_[block] == 1) request_held_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (--refcount_[block] == 0) {
    free_.push_back(block);
    Publish();
  }
}

Status BlockPool::CheckIntegrity() const {
  std::vector<uint8_t> listed(refcount_.size(), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= num_blocks()) return Internal("block pool: free list holds bad id {}", b);
    if (listed[b]++) return Internal("block pool: block {} is on the free list twice", b);
    if (refcount_[b] != 0) return Internal("block pool: free block {} has refcount {}", b, refcount_[b]);
  }
  int32_t held = 0;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    if (refcount_[b] < 0) return Internal("block pool: block {} has refcount {}", b, refcount_[b]);
    if (refcount_[b] == 0 && !listed[b]) return Internal("block pool: block {} leaked (refcount 0, not free)", b);
    if (cache_ref_[b] > 1 || cache_ref_[b] > refcount_[b])
      return Internal("block pool: block {} has {} cache references and refcount {}", b, cache_ref_[b], refcount_[b]);
    held += refcount_[b] > cache_ref_[b] ? 1 : 0;
  }
  if (held != num_request_held())
    return Internal("block pool: {} blocks held by requests, counted {}", held, num_request_held());
  if (static_cast<int32_t>(free_.size()) != num_free())
    return Internal("block pool: {} free blocks, published {}", free_.size(), num_free());
  return Status::Ok();
}

}  // namespace tarmac::kv
