#include "kvevents/block_set.h"

#include <algorithm>
#include <iterator>

namespace tarmac::kvevents {

void BlockSet::Apply(const WireBatch& batch) {
  for (const WireEvent& e : batch.events) {
    switch (e.kind) {
      case WireEvent::Kind::kCleared:
        blocks_.clear();
        ++cleared_;
        break;
      case WireEvent::Kind::kStored: {
        // A grouped event chains its blocks: block i's parent is block i - 1.
        std::optional<uint64_t> parent = e.parent;
        for (size_t i = 0; i < e.hashes.size(); ++i) {
          if (parent && !blocks_.count(*parent)) ++orphans_;
          Block b;
          b.parent = parent;
          b.tokens.assign(e.tokens.begin() + static_cast<std::ptrdiff_t>(i) * e.block_size,
                          e.tokens.begin() + static_cast<std::ptrdiff_t>(i + 1) * e.block_size);
          blocks_[e.hashes[i]] = std::move(b);
          parent = e.hashes[i];
          ++stored_;
        }
        break;
      }
      case WireEvent::Kind::kRemoved:
        for (uint64_t h : e.hashes) {
          if (!blocks_.erase(h)) ++unknown_removals_;
          ++removed_;
        }
        break;
    }
  }
}

std::vector<uint64_t> BlockSet::SortedHashes() const {
  std::vector<uint64_t> out;
  out.reserve(blocks_.size());
  for (const auto& [h, b] : blocks_) out.push_back(h);
  std::sort(out.begin(), out.end());
  return out;
}

Status BlockSet::CheckIntegrity() const {
  for (const auto& [h, b] : blocks_)
    if (b.parent && !blocks_.count(*b.parent)) return Internal("block set: block {} has parent {} not held", h, *b.parent);
  return Status::Ok();
}

double Jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  std::vector<uint64_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return static_cast<double>(both.size()) / static_cast<double>(a.size() + b.size() - both.size());
}

}  // namespace tarmac::kvevents
