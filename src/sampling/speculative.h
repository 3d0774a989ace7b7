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
// alts: token trees' further candidates at the same position (siblings of id), drawn as id
// was: independently from q, or (q empty) chosen deterministically (the draft's next-best
// tokens). They may repeat each other or id (independent draws do).
struct DraftToken {
  int32_t id = -1;
  std::vector<float> q;
  std::vector<int32_t> alts;
};

// Draws a draft token with `draft` (a sampler of the request's parameters and history). logits:
// the draft model's raw logits, processed in place. At temperature 0 the draft is the argmax
// and q stays empty.
DraftToken SampleDraft(Sampler& draft, std::span<float> logits);

// Sibling candidates for a token tree, into d->alts: after SampleDraft drew *d from `logits`
// (which it processed in place): with q empty (temperature 0) the n next-best tokens by
// logit, best first; else n more independent draws from q (they may repeat).
void DrawAlternatives(Sampler& draft, std::span<const float> logits, int32_t n, DraftToken* d);

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

struct CandidatesOutcome {
  int32_t accepted = -1;  // index into the candidates of the one accepted; -1: none
  SampleResult token;     // that candidate, else the replacement drawn from the last residual
};

// Multi-candidate verification (SpecInfer's multi-step speculative sampling) of one tree
// node's children: candidates[0..n) were drawn independently from q (q empty: fixed
// proposals, each a point mass). In order, candidate i is accepted with probability
// min(1, p_i(x_i) / q(x_i)), where p_1 = p (the target's distribution) and after a rejection
// p_{i+1} = normalize(max(0, p_i - q)); when all are rejected the token is drawn from
// p_{n+1}. The token that comes out is distributed as p. At temperature 0: the first
// candidate equal to the target's argmax, else the argmax. One candidate is VerifyDraft.
// Same contract as VerifyDraft otherwise. Preconditions: candidates non-empty.
CandidatesOutcome VerifyCandidates(Sampler& target, std::span<float> logits,
                                   std::span<const int32_t> candidates, std::span<const float> q,
                                   const grammar::TokenBitmask* mask = nullptr);

}  // namespace tarmac::sampling
