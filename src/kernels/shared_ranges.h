// SharedRanges: the work items of 1..4 matrices (rows, row groups, row blocks) numbered as one
// range [0, total()), so that one parallel region covers them all (MatMulShared's fused
// forms: a layer's Q/K/V, or gate/up) and each thread's chunk maps back to per-matrix items.
//
// Immutable after construction; a value type, thread-safe to read.
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/check.h"

namespace tarmac::kernels {

class SharedRanges {
 public:
  static constexpr int kMax = 4;

  // counts[i] >= 0: matrix i's items. Preconditions: 1 <= n <= kMax.
  SharedRanges(const int64_t* counts, int n) : n_(n) {
    TARMAC_CHECK(n >= 1 && n <= kMax);
    for (int i = 0; i < n; ++i) {
      TARMAC_CHECK(counts[i] >= 0);
      first_[i + 1] = first_[i] + counts[i];
    }
  }

  int64_t total() const { return first_[n_]; }

  // fn(i, begin, end) for each matrix i whose items [begin, end) (its own numbering) lie in
  // [b, e), in matrix order. Preconditions: 0 <= b <= e <= total().
  template <typename Fn>
  void ForEach(int64_t b, int64_t e, Fn&& fn) const {
    TARMAC_DCHECK(0 <= b && b <= e && e <= total());
    for (int i = 0; i < n_; ++i) {
      const int64_t lb = std::max(b, first_[i]) - first_[i];
      const int64_t le = std::min(e, first_[i + 1]) - first_[i];
      if (lb < le) fn(i, lb, le);
    }
  }

 private:
  int n_;
  int64_t first_[kMax + 1] = {0};
};

}  // namespace tarmac::kernels
