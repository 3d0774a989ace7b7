#include "sampling/speculative.h"

#include <algorithm>

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

VerifyOutcome VerifyDraft(Sampler& target, std::span<float> logits, const DraftToken& draft,
                          const grammar::TokenBitmask* mask) {
  const int32_t top_n = target.params().top_logprobs;
  const std::vector<float> raw(logits.begin(), logits.end());
  if (mask != nullptr) mask->ApplyToLogits(logits);
  target.ApplyProcessors(logits);
  VerifyOutcome out;
  if (target.params().temperature == 0.0f) {
    const int32_t best = ArgMax(logits);
    out.accepted = best == draft.id;
    out.token.id = best;
  } else {
    std::vector<float> p(logits.size());
    target.Distribution(logits, p);
    const double pd = p[draft.id];
    const double qd = draft.q.empty() ? 1.0 : draft.q[draft.id];
    const double u = target.rng().Uniform();
    if (qd > 0.0 && u * qd < pd) {
      out.accepted = true;
      out.token.id = draft.id;
    } else {
      // Residual max(0, p - q); with a point-mass q it is p without the draft token.
      double total = 0;
      for (size_t i = 0; i < p.size(); ++i) {
        const float qi = draft.q.empty() ? (static_cast<int32_t>(i) == draft.id ? 1.0f : 0.0f)
                                         : draft.q[i];
        p[i] = std::max(0.0f, p[i] - qi);
        total += p[i];
      }
      if (total <= 0.0) {  // p == q up to rounding: the residual is empty, fall back to p
        target.Distribution(logits, p);
        total = 1.0;
      }
      out.token.id = Draw(p, total, target.rng().Uniform());
    }
  }
  TopLogprobs(raw, top_n, out.token.id, &out.token);
  return out;
}

}  // namespace tarmac::sampling
