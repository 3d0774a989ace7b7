// BlockSet: what a follower of one publisher's events knows of that replica's prefix cache: the
// cached blocks by hash, each with its parent and token ids, rebuilt by applying the decoded
// batches in sequence order. It counts what a correct stream never contains: a stored block
// whose parent was never announced (an orphan) and a removal of a block it does not hold.
//
// Plain value; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kvevents/wire_format.h"

namespace tarmac::kvevents {

class BlockSet {
 public:
  struct Block {
    std::optional<uint64_t> parent;
    std::vector<int32_t> tokens;
  };

  void Apply(const WireBatch& batch);

  size_t size() const { return blocks_.size(); }
  bool contains(uint64_t hash) const { return blocks_.count(hash) > 0; }
  const std::unordered_map<uint64_t, Block>& blocks() const { return blocks_; }
  std::vector<uint64_t> SortedHashes() const;
  int64_t orphans() const { return orphans_; }
  int64_t unknown_removals() const { return unknown_removals_; }
  int64_t cleared() const { return cleared_; }
  int64_t stored() const { return stored_; }
  int64_t removed() const { return removed_; }

  // Every held block's parent is held too (a cache evicts children before their parents).
  Status CheckIntegrity() const;

 private:
  std::unordered_map<uint64_t, Block> blocks_;
  int64_t orphans_ = 0, unknown_removals_ = 0, cleared_ = 0, stored_ = 0, removed_ = 0;
};

// |a ∩ b| / |a ∪ b|; 1 for two empty sets.
double Jaccard(const std::vector<uint64_t>& sorted_a, const std::vector<uint64_t>& sorted_b);

}  // namespace tarmac::kvevents
