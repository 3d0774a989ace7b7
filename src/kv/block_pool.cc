#include "kv/block_pool.h"

#include "base/check.h"

namespace tarmac::kv {

BlockPool::BlockPool(int32_t num_blocks) {
  TARMAC_CHECK(num_blocks >= 1);
  refcount_.assign(num_blocks, 0);
  free_.reserve(num_blocks);
  // Low ids on top of the stack so a fresh pool hands out 0, 1, 2, ...
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> BlockPool::Allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  TARMAC_DCHECK(refcount_[b] == 0);
  refcount_[b] = 1;
  return b;
}

void BlockPool::Ref(int32_t block) {
  TARMAC_CHECK(block >= 0 && block < num_blocks() && refcount_[block] > 0);
  ++refcount_[block];
}

void BlockPool::Release(int32_t block) {
  TARMAC_CHECK(block >= 0 && block < num_blocks() && refcount_[block] > 0);
  if (--refcount_[block] == 0) free_.push_back(block);
}

Status BlockPool::CheckIntegrity() const {
  std::vector<uint8_t> listed(refcount_.size(), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= num_blocks()) return Internal("block pool: free list holds bad id {}", b);
    if (listed[b]++) return Internal("block pool: block {} is on the free list twice", b);
    if (refcount_[b] != 0) return Internal("block pool: free block {} has refcount {}", b, refcount_[b]);
  }
  for (int32_t b = 0; b < num_blocks(); ++b) {
    if (refcount_[b] < 0) return Internal("block pool: block {} has refcount {}", b, refcount_[b]);
    if (refcount_[b] == 0 && !listed[b]) return Internal("block pool: block {} leaked (refcount 0, not free)", b);
  }
  return Status::Ok();
}

}  // namespace tarmac::kv
