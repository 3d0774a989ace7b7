// NgramProposer: prompt lookup. Finds the latest earlier occurrence of the request's last n
// tokens (n from max_n down to min_n) in its own prompt and output, and proposes the tokens
// that followed it. No model, no state; strong wherever output quotes its input (extraction,
// code edits, RAG). Proposals are deterministic (point-mass q).
#pragma once

#include "speculative/proposer.h"

namespace tarmac::speculative {

class NgramProposer : public Proposer {
 public:
  // Preconditions: 1 <= min_n <= max_n.
  NgramProposer(int32_t min_n = 1, int32_t max_n = 3);
  const char* name() const override { return "ngram"; }
  void Propose(std::span<const ProposeRequest> requests,
               std::vector<std::vector<sampling::DraftToken>>* drafts) override;

  // The lookup itself: up to k tokens that followed the latest earlier match of the suffix.
  std::vector<int32_t> Lookup(std::span<const int32_t> tokens, int32_t k) const;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace tarmac::speculative
