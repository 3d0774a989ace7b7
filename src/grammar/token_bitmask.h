// TokenBitmask: one bit per vocabulary token (1 = allowed), as the matcher fills it and the
// sampler applies it. Plain value; not thread-safe to mutate concurrently.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "base/check.h"

namespace tarmac::grammar {

class TokenBitmask {
 public:
  TokenBitmask() = default;
  explicit TokenBitmask(int32_t n_vocab) : n_(n_vocab), words_((n_vocab + 63) / 64, 0) {}

  int32_t size() const { return n_; }
  int32_t num_words() const { return static_cast<int32_t>(words_.size()); }
  uint64_t* words() { return words_.data(); }
  const uint64_t* words() const { return words_.data(); }

  // Preconditions: 0 <= id < size().
  bool Test(int32_t id) const {
    TARMAC_DCHECK(id >= 0 && id < n_);
    return (words_[id >> 6] >> (id & 63)) & 1;
  }
  void Set(int32_t id) {
    TARMAC_DCHECK(id >= 0 && id < n_);
    words_[id >> 6] |= 1ull << (id & 63);
  }
  void Clear() { std::fill(words_.begin(), words_.end(), 0); }
  int32_t Count() const {
    int32_t c = 0;
    for (uint64_t w : words_) c += std::popcount(w);
    return c;
  }
  std::vector<int32_t> AllowedIds() const {
    std::vector<int32_t> ids;
    for (int32_t w = 0; w < num_words(); ++w)
      for (uint64_t bits = words_[w]; bits; bits &= bits - 1) ids.push_back(w * 64 + std::countr_zero(bits));
    return ids;
  }

  // Sets every disallowed logit to -inf. Logits past size() (a model's padded rows) are
  // disallowed too. Word by word: an all-allowed word is skipped, the others select per bit.
  void ApplyToLogits(std::span<float> logits) const {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const size_t n = logits.size();
    for (size_t base = 0; base < n; base += 64) {
      const uint64_t bits = base / 64 < words_.size() ? words_[base / 64] : 0;
      const size_t count = std::min<size_t>(64, n - base);
      if (bits == ~0ull && count == 64) continue;
      float* x = logits.data() + base;
      if (bits == 0) {
        std::fill_n(x, count, neg_inf);
        continue;
      }
      for (size_t j = 0; j < count; ++j) x[j] = ((bits >> j) & 1) ? x[j] : neg_inf;
    }
  }

 private:
  int32_t n_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace tarmac::grammar
