// Speculative sampling (Leviathan et al. 2022; Chen et al. 2023): a draft proposes tokens from
// its distribution q, the target accepts draft d with probability min(1, p(d) / q(d)) and on
// rejection samples from normalize(max(0, p - q)); the tokens that come out are distributed
// exactly as the target's own samples. With temperature 0 this reduces to "accept iff d is
// the target's argmax", so greedy output is unchanged by speculation.
//
// p and q both come from Sampler's pipeline (bias, penalties, temperature, top-k/p, min-p) on
// samplers with the same parameters and history, so the transforms match. Free functions;
// they mutate only the logits passed in and the RNG.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"

namespace tarmac::sampling {

// A draft token and the distribution it was drawn from: q is [n_vocab] probabilities, or
// empty when the proposal was deterministic (greedy draft, n-gram lookup): a point mass at id.
struct DraftToken {
  int32_t id = -1;
  std::vector<float> q;
};

// Draws a draft token with `draft` (a sampler of the request's parameters and history). logits:
// the draft model's raw logits, processed in place. At temperature 0 the draft is the argmax
// and q stays empty.
DraftToken SampleDraft(Sampler& draft, std::span<float> logits);

struct VerifyOutcome {
  bool accepted = false;
  SampleResult token;  // the draft when accepted, else the replacement drawn from the residual
};

// Verifies one draft token against the target's raw logits at that position (processed in
// place). Uses target.rng(); does not Accept the token (the caller does, in order). mask (a
// grammar's allowed tokens at that position, optional) restricts p as in Sampler::Sample: a
// draft the grammar forbids has p = 0 and is rejected, its replacement drawn from allowed
// tokens only. Preconditions: mask allows at least one token.
VerifyOutcome VerifyDraft(Sampler& target, std::span<float> logits, const DraftToken& draft,
                          const grammar::TokenBitmask* mask = nullptr);

}  // namespace tarmac::sampling
