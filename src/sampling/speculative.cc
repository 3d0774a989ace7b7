#include "sampling/speculative.h"

#include <algorithm>
#include <limits>

#include "base/check.h"

namespace tarmac::sampling {
namespace {

// Index drawn from weights w (non-negative, sum > 0) with u in [0, 1).
int32_t Draw(std::span<const float> w, double total, double u) {
  const double target = u * total;
  double cum = 0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0f) continue;
    last = static_cast<int32_t>(i);
    cum += w[i];
    if (target < cum) return last;
  }
  return last;  // rounding left target just above the total
}

}  // namespace

DraftToken SampleDraft(Sampler& draft, std::span<float> logits) {
  DraftToken d;
  draft.ApplyProcessors(logits);
  if (draft.params().temperature == 0.0f) {
    d.id = ArgMax(logits);
    return d;
  }
  d.q.resize(logits.size());
  draft.Distribution(logits, d.q);
  d.id = Draw(d.q, 1.0, draft.rng().Uniform());
  TARMAC_CHECK(d.id >= 0);
  return d;
}

void DrawAlternatives(Sampler& draft, std::span<const float> logits, int32_t n, DraftToken* d) {
  d->alts.clear();
  if (!d->q.empty()) {
    for (int32_t i = 0; i < n; ++i) {
      const int32_t x = Draw(d->q, 1.0, draft.rng().Uniform());
      TARMAC_CHECK(x >= 0);
      d->alts.push_back(x);
    }
    return;
  }
  for (int32_t i = 0; i < n; ++i) {
    int32_t best = -1;
    for (size_t j = 0; j < logits.size(); ++j) {
      const int32_t t = static_cast<int32_t>(j);
      if (t == d->id || std::find(d->alts.begin(), d->alts.end(), t) != d->alts.end()) continue;
      if (best < 0 || logits[j] > logits[static_cast<size_t>(best)]) best = t;
    }
    if (best < 0 || logits[static_cast<size_t>(best)] == -std::numeric_limits<float>::infinity()) break;
    d->alts.push_back(best);
  }
}

VerifyOutcome VerifyDraft(Sampler& target, std::span<float> logits, const DraftToken& draft,
                          const grammar::TokenBitmask* mask) {
  const int32_t id = draft.id;
  CandidatesOutcome c = VerifyCandidates(target, logits, std::span<const int32_t>(&id, 1), draft.q, mask);
  return {c.accepted == 0, std::move(c.token)};
}

CandidatesOutcome VerifyCandidates(Sampler& target, std::span<float> logits,
                                   std::span<const int32_t> candidates, std::span<const float> q,
                                   const grammar::TokenBitmask* mask) {
  TARMAC_CHECK(!candidates.empty());
  const int32_t top_n = target.params().top_logprobs;
  const std::vector<float> raw(logits.begin(), logits.end());
  if (mask != nullptr) mask->ApplyToLogits(logits);
  target.ApplyProcessors(logits);
  CandidatesOutcome out;
  if (target.params().temperature == 0.0f) {
    const int32_t best = ArgMax(logits);
    const auto it = std::find(candidates.begin(), candidates.end(), best);
    if (it != candidates.end()) out.accepted = static_cast<int32_t>(it - candidates.begin());
    out.token.id = best;
  } else {
    // p stays unnormalised (sum `total`): p_i = p / total.
    std::vector<float> p(logits.size()), prev;
    target.Distribution(logits, p);
    double total = 1.0;
    for (size_t i = 0; i < candidates.size() && out.accepted < 0; ++i) {
      const int32_t x = candidates[i];
      const double qx = q.empty() ? 1.0 : q[x];
      const double u = target.rng().Uniform();
      if (qx > 0.0 && u * qx * total < p[x]) {
        out.accepted = static_cast<int32_t>(i);
        out.token.id = x;
        break;
      }
      // Residual max(0, p_i - q); with a point-mass q it is p_i without the candidate.
      prev = p;
      double next = 0;
      for (size_t j = 0; j < p.size(); ++j) {
        const float qj = q.empty() ? (static_cast<int32_t>(j) == x ? 1.0f : 0.0f) : q[j];
        p[j] = std::max(0.0f, p[j] - static_cast<float>(total) * qj);
        next += p[j];
      }
      if (next <= 0.0) {  // p_i == q up to rounding: the residual is empty, keep p_i
        p.swap(prev);
      } else {
        total = next;
      }
    }
    if (out.accepted < 0) out.token.id = Draw(p, total, target.rng().Uniform());
  }
  TopLogprobs(raw, top_n, out.token.id, &out.token);
  return out;
}

}  // namespace tarmac::sampling
