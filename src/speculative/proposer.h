// Proposer: the cheap side of speculative decoding. Given requests whose known tokens are all
// computed by the target except the last, it guesses the next k tokens of each. Two kinds: a
// draft model (DraftModelProposer) and n-gram prompt lookup (NgramProposer).
//
// The engine calls Propose once per step for the speculating requests, then Rollback with how
// many of the guesses the target accepted, and Release when a request ends or is preempted.
// Not thread-safe: the engine's step thread owns proposers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "sampling/sampler.h"
#include "sampling/speculative.h"

namespace tarmac::speculative {

struct ProposeRequest {
  int64_t id = 0;
  const std::vector<int32_t>* tokens = nullptr;  // prompt + output so far
  const sampling::Sampler* sampler = nullptr;    // the request's sampler (params + history)
  int32_t k = 0;                                 // guesses wanted (>= 1)
  // Sibling candidates wanted at each guessed position (DraftToken::alts; token trees and
  // the policy's measure of them); proposers without alternatives leave them empty.
  int32_t alts = 0;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual const char* name() const = 0;
  // drafts[i]: up to requests[i].k guesses (possibly none) for requests[i].
  virtual void Propose(std::span<const ProposeRequest> requests,
                       std::vector<std::vector<sampling::DraftToken>>* drafts) = 0;
  // The request now has `valid_len` tokens that the proposer's guesses agree with (the old
  // tokens plus the accepted guesses); anything it computed beyond is discarded.
  virtual void Rollback(int64_t id, int32_t valid_len) { (void)id, (void)valid_len; }
  // The request is gone (finished, cancelled or preempted): free its state.
  virtual void Release(int64_t id) { (void)id; }
  virtual Status CheckIntegrity() const { return Status::Ok(); }
  // The steady part of the last Propose: its rounds that fed the draft model at most two
  // tokens a request (the guess accepted last step and the bonus token), and their seconds.
  // A round that first catches up a new request's prompt costs many rounds' worth, and the
  // policy prices drafting from these measurements. False: the proposer has no such split
  // (the whole call is the cost).
  virtual bool SteadyRounds(int32_t* rounds, double* seconds) const {
    (void)rounds, (void)seconds;
    return false;
  }
};

}  // namespace tarmac::speculative
