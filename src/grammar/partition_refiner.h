// One round of partition refinement (Moore's algorithm), shared by DFA minimisation
// (rule_dfa.h) and mask classes (mask_classes.h): states get equal ids exactly when their
// signatures (integer sequences built from the previous round's ids) are equal. Signatures
// are written into one flat buffer and grouped in a hash table, so a round costs no
// allocation per state. Internal to the grammar module; scratch only, one per thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "base/hash.h"

namespace tarmac::grammar {

class PartitionRefiner {
 public:
  // sig(s, out) appends state s's signature to *out. Writes the new id of each of the n
  // states to *ids (0.. in order of first appearance) and returns the number of ids.
  template <typename SigFn>
  int32_t Round(int32_t n, SigFn sig, std::vector<int32_t>* ids) {
    flat_.clear();
    begin_.assign(n + 1, 0);
    hash_.resize(n);
    for (int32_t s = 0; s < n; ++s) {
      begin_[s] = static_cast<uint32_t>(flat_.size());
      sig(s, &flat_);
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (size_t i = begin_[s]; i < flat_.size(); ++i) h = SplitMix64(h ^ static_cast<uint64_t>(flat_[i]));
      hash_[s] = h;
    }
    begin_[n] = static_cast<uint32_t>(flat_.size());
    // Open addressing over the hashes; a slot holds the first state of its group.
    size_t cap = 16;
    while (cap < 2 * static_cast<size_t>(n)) cap *= 2;
    slot_.assign(cap, -1);
    ids->resize(n);
    int32_t next = 0;
    for (int32_t s = 0; s < n; ++s) {
      for (size_t i = hash_[s] & (cap - 1);; i = (i + 1) & (cap - 1)) {
        const int32_t t = slot_[i];
        if (t < 0) {
          slot_[i] = s;
          (*ids)[s] = next++;
          break;
        }
        const auto a = Sig(t), b = Sig(s);
        if (hash_[t] == hash_[s] && std::equal(a.begin(), a.end(), b.begin(), b.end())) {
          (*ids)[s] = (*ids)[t];
          break;
        }
      }
    }
    return next;
  }

 private:
  std::span<const int64_t> Sig(int32_t s) const { return {flat_.data() + begin_[s], begin_[s + 1] - begin_[s]}; }

  std::vector<int64_t> flat_;
  std::vector<uint32_t> begin_;
  std::vector<uint64_t> hash_;
  std::vector<int32_t> slot_;
};

}  // namespace tarmac::grammar
