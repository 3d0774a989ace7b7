// Offline evaluation of a two-model cascade, with RouteLLM's metrics. Each prompt has both
// models' answers scored by one judge (quality), the cascade's confidence signal on the small
// answer, and what each attempt cost. Escalating the least confident share s of the prompts
// gives a quality Q(s); PGR(s) = (Q(s) - Q_small) / (Q_large - Q_small), the fraction of the
// quality gap recovered; APGR = the area under PGR over s in [0, 1] (random routing has
// E[PGR(s)] = s, APGR 0.5); CPT(x) = the smallest share of large calls reaching PGR x.
// Confidence intervals are percentiles over bootstrap resamples of the prompts.
//
// Pure functions over plain values; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tarmac::router {

struct PromptOutcome {
  double q_small = 0, q_large = 0;  // judge's quality of each model's answer
  double confidence = 0;            // the small answer's signal: higher keeps it
  double small_full = 0;            // cost of the small model's whole answer (kept)
  double small_attempt = 0;         // cost of its discarded attempt (escalated at k tokens)
  double large = 0;                 // cost of the large model's answer
};

struct CurvePoint {
  double threshold = 0;  // escalate when confidence < threshold
  double share_large = 0;
  double quality = 0;
  double pgr = 0;
  double cost = 0;       // summed over prompts, discarded attempts counted
};

struct CascadeEval {
  double q_small = 0, q_large = 0, se_large = 0;  // mean quality of always-small / always-large
  std::vector<CurvePoint> curve;                 // escalating 0, 1, ..., n prompts
  double apgr = 0, apgr_random = 0;
  double cpt50 = 1, cpt80 = 1;
  double cost_small = 0, cost_large = 0;         // always-small, always-large
  // The cheapest point whose quality is within one standard error of always-large.
  CurvePoint at_large_quality;
};

// Preconditions: !prompts.empty().
CascadeEval EvaluateCascade(const std::vector<PromptOutcome>& prompts);
// APGR of escalating the prompts in `order` (first escalated first).
double Apgr(const std::vector<PromptOutcome>& prompts, const std::vector<size_t>& order);

struct Interval {
  double lo = 0, hi = 0;
};
// Bootstrap percentiles (2.5, 97.5) of the cascade's APGR and of a random ordering's.
void BootstrapApgr(const std::vector<PromptOutcome>& prompts, int resamples, uint64_t seed, Interval* cascade,
                   Interval* random);

}  // namespace tarmac::router
