#include "speculative/ngram_proposer.h"

#include <algorithm>

#include "base/check.h"

namespace tarmac::speculative {

NgramProposer::NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {
  TARMAC_CHECK(min_n >= 1 && min_n <= max_n);
}

std::vector<int32_t> NgramProposer::Lookup(std::span<const int32_t> tokens, int32_t k) const {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int32_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const auto suffix = tokens.subspan(len - n);
    // Latest match that is followed by at least one token, scanning backwards.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t take = std::min<int64_t>(k, len - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + take);
    }
  }
  return {};
}

void NgramProposer::Propose(std::span<const ProposeRequest> requests,
                            std::vector<std::vector<sampling::DraftToken>>* drafts) {
  drafts->assign(requests.size(), {});
  for (size_t i = 0; i < requests.size(); ++i) {
    for (int32_t t : Lookup(*requests[i].tokens, requests[i].k)) {
      sampling::DraftToken d;
      d.id = t;
      (*drafts)[i].push_back(std::move(d));
    }
  }
}

}  // namespace tarmac::speculative
