#include "speculative/spec_policy.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace tarmac::speculative {

SpecPolicy::SpecPolicy(const SpecPolicyConfig& config) : config_(config) {
  config_.max_k = std::clamp(config_.max_k, 0, kMaxDraft);
}

double SpecPolicy::StepSeconds(int32_t tokens) const { return steps_.Seconds(tokens); }

bool SpecPolicy::AcceptanceCouldPay(int32_t batch, int32_t in_bucket, int32_t other_drafts,
                                    int32_t max_k) const {
  // Nothing measured (the decode step, or the draft): find out.
  if (StepSeconds(std::max(batch, 1)) <= 0 || !draft_measured_) return true;
  for (int32_t k = 1; k <= MaxK(max_k) && OthersAllow(k, batch, in_bucket, other_drafts); ++k) {
    if (PredictSpeedup(kProbeAcceptance, k, batch, in_bucket, other_drafts) >
        1.0 + config_.min_gain) {
      return true;
    }
  }
  return false;
}

SpecPolicy::Acc& SpecPolicy::At(metrics::BucketId b) {
  TARMAC_CHECK(b >= 0);
  if (static_cast<size_t>(b) >= acc_.size()) acc_.resize(static_cast<size_t>(b) + 1);
  return acc_[static_cast<size_t>(b)];
}

double SpecPolicy::AcceptanceEstimate(metrics::BucketId bucket) const {
  if (bucket < 0 || static_cast<size_t>(bucket) >= acc_.size()) return Acc{}.Estimate();
  return acc_[static_cast<size_t>(bucket)].Estimate();
}

int32_t SpecPolicy::LastK(metrics::BucketId bucket) const {
  if (bucket < 0 || static_cast<size_t>(bucket) >= acc_.size()) return 0;
  return acc_[static_cast<size_t>(bucket)].last_k;
}

bool SpecPolicy::StepCosts(int32_t k, int32_t batch, int32_t in_bucket, int32_t other_drafts,
                           double* decode, double* verify, double* draft, int32_t nodes) const {
  if (in_bucket < 0 || in_bucket > batch) in_bucket = batch;
  other_drafts = std::max(other_drafts, 0);
  if (nodes < 0) nodes = k;
  *decode = StepSeconds(batch + other_drafts);
  *verify = StepSeconds(batch + other_drafts + nodes * in_bucket);
  *draft = k * DraftRoundSeconds(std::max(in_bucket, 1));
  return *decode > 0 && *verify > 0 && draft_measured_;
}

double SpecPolicy::StepSlowdown(int32_t k, int32_t batch, int32_t in_bucket,
                                int32_t other_drafts) const {
  double decode, verify, draft;
  if (k <= 0 || !StepCosts(k, batch, in_bucket, other_drafts, &decode, &verify, &draft)) {
    return 1.0;
  }
  return (draft + verify) / decode;
}

bool SpecPolicy::OthersAllow(int32_t k, int32_t batch, int32_t in_bucket,
                             int32_t other_drafts, int32_t nodes) const {
  const bool others = in_bucket >= 0 && in_bucket < batch;
  if (!others || config_.max_other_slowdown < 0) return true;
  double decode, verify, draft;
  if (!StepCosts(k, batch, in_bucket, other_drafts, &decode, &verify, &draft, nodes)) return true;
  return (draft + verify) / decode <= 1.0 + config_.max_other_slowdown;
}

double SpecPolicy::ExpectedTokens(double a, const std::array<double, kMaxWidth + 1>& hit,
                                  const TreeShape& shape) {
  a = std::clamp(a, 0.0, 0.999);
  double e = 0, reach = 1;  // reach: a^(d-1)
  for (int32_t d = 1; d <= shape.depth; ++d) {
    const int32_t w = std::clamp(shape.WidthAt(d - 1), 0, kMaxWidth);
    e += reach * (1 - a) * (d + hit[w]);
    reach *= a;
  }
  return e + reach * (shape.depth + 1);
}

double SpecPolicy::Speedup(double expected, const TreeShape& shape, int32_t batch,
                           int32_t in_bucket, int32_t other_drafts) const {
  double decode, verify, draft;
  // Nothing measured yet (no decode step of this size, no draft round): probing finds out.
  if (shape.depth <= 0 ||
      !StepCosts(shape.depth, batch, in_bucket, other_drafts, &decode, &verify, &draft, shape.Nodes())) {
    return 1.0;
  }
  return expected * decode / (draft + verify);
}

double SpecPolicy::PredictSpeedup(double a, int32_t k, int32_t batch, int32_t in_bucket,
                                  int32_t other_drafts) const {
  const TreeShape chain{k, 0, 0};
  return Speedup(ExpectedTokens(a, {}, chain), chain, batch, in_bucket, other_drafts);
}

double SpecPolicy::PredictShapeSpeedup(double a, const std::array<double, kMaxWidth + 1>& hit,
                                       const TreeShape& shape, int32_t batch, int32_t in_bucket,
                                       int32_t other_drafts) const {
  return Speedup(ExpectedTokens(a, hit, shape), shape, batch, in_bucket, other_drafts);
}

std::array<double, kMaxWidth + 1> SpecPolicy::Hits(const Acc& acc) const {
  std::array<double, kMaxWidth + 1> h{};
  for (int32_t w = 1; w <= kMaxWidth; ++w) h[w] = acc.seen[w] > 0 ? acc.hits[w] / acc.seen[w] : 0.0;
  return h;
}

double SpecPolicy::SiblingHit(metrics::BucketId bucket, int32_t width) const {
  if (bucket < 0 || static_cast<size_t>(bucket) >= acc_.size()) return 0;
  return Hits(acc_[static_cast<size_t>(bucket)])[std::clamp(width, 0, kMaxWidth)];
}

double SpecPolicy::OptimisticSpeedup(double a, const std::array<double, kMaxWidth + 1>& hit,
                                     const TreeShape& shape, int32_t batch, int32_t in_bucket,
                                     int32_t other_drafts) const {
  double decode, verify, draft;
  if (!StepCosts(shape.depth, batch, in_bucket, other_drafts, &decode, &verify, &draft, shape.Nodes())) return 0;
  if (in_bucket < 0 || in_bucket > batch) in_bucket = batch;
  const int32_t tokens = batch + std::max(other_drafts, 0) + shape.Nodes() * in_bucket;
  if (steps_.BinCount(tokens) >= 3) return 0;  // measured: priced as it is
  double at_n, at_s;
  int32_t bin_start = 1;  // its log2 bin's smallest size: the price comes from below the bin
  while (bin_start * 2 <= tokens) bin_start *= 2;
  if (!steps_.LargestUpTo(bin_start - 1, &at_n, &at_s)) return 0;
  return ExpectedTokens(a, hit, shape) * decode / (draft + at_s);
}

void SpecPolicy::ObserveSibling(metrics::BucketId bucket, int32_t rank, int32_t known) {
  Acc& acc = At(bucket);
  acc.hit_seen = true;
  for (int32_t w = 1; w <= std::min(known, kMaxWidth); ++w) {
    acc.hits[w] = acc.hits[w] * config_.decay + (rank >= 0 && rank < w ? 1 : 0);
    acc.seen[w] = acc.seen[w] * config_.decay + 1;
  }
}

int32_t SpecPolicy::ChooseK(metrics::BucketId bucket, int32_t batch, int32_t in_bucket,
                            int32_t other_drafts, int32_t max_k_cap) {
  return ChooseShape(bucket, batch, in_bucket, other_drafts, max_k_cap, /*allow_trees=*/false).depth;
}

TreeShape SpecPolicy::ChooseShape(metrics::BucketId bucket, int32_t batch, int32_t in_bucket,
                                  int32_t other_drafts, int32_t max_k_cap, bool allow_trees) {
  Acc& acc = At(bucket);
  const int32_t max_k = MaxK(max_k_cap);
  const double a = acc.Estimate();
  const std::array<double, kMaxWidth + 1> hit = Hits(acc);
  const int32_t max_w = allow_trees ? std::clamp(config_.max_width, 0, kMaxWidth) : 0;
  TreeShape best_shape, unmeasured;
  double best = 1.0 + config_.min_gain, best_unmeasured = 0;
  // Until a draft of this bucket has been verified its acceptance is only the prior: the
  // model is not acted on for every request (at batch 41 that was 41 draft catch-ups on a
  // guess); the probe below measures it.
  // The slowdown grows with k: the first k past the others' limit ends the search.
  // Trees are priced only with measured sibling hits (h = 0 before: no gain predicted).
  for (int32_t k = 1; acc.verifies > 0 && k <= max_k &&
                      OthersAllow(k, batch, in_bucket, other_drafts);
       ++k) {
    for (int32_t w = 0; w <= max_w; ++w) {
      const int32_t max_b = w == 0 ? 0 : std::min(k, config_.max_branch);
      for (int32_t b = w == 0 ? 0 : 1; b <= max_b; ++b) {
        const TreeShape shape{k, w, b};
        if (shape.tree() && (shape.Nodes() > config_.max_tree_tokens ||
                             !OthersAllow(k, batch, in_bucket, other_drafts, shape.Nodes()))) {
          continue;
        }
        const double s = PredictShapeSpeedup(a, hit, shape, batch, in_bucket, other_drafts);
        if (s > best) {
          best = s;
          best_shape = shape;
        }
        // A shape whose verify step size is barely measured is priced by extrapolation or
        // by a noisy sample, which may never let it be measured (again); its price if that
        // step cost what the largest measured one below it does is what a probe could find.
        if (!shape.tree() || acc.hit_seen) {
          const double u = OptimisticSpeedup(a, hit, shape, batch, in_bucket, other_drafts);
          if (u > best_unmeasured) {
            best_unmeasured = u;
            unmeasured = shape;
          }
        }
      }
    }
  }
  // Probe the most promising barely measured shape now and then (once per probe_every / 4
  // steps' decisions) when it might beat the best measured choice.
  const int64_t tree_period = std::max<int64_t>(1, config_.probe_every / 4) * std::max(batch, 1);
  if (unmeasured.depth > 0 && best_unmeasured > best && ++acc.since_tree_probe >= tree_period) {
    acc.since_tree_probe = 0;
    acc.last_k = unmeasured.depth;
    return unmeasured;
  }
  // Probe about once per probe_every engine steps (a step makes `batch` decisions), so large
  // batches do not pay for a probing request in every step.
  // A bucket never measured is probed at once. No probe where even near-perfect acceptance
  // would not pay at this batch size (the step costs rule it out, not the acceptance, and a
  // probe only measures acceptance): at batch 64 on a compute-bound model those probes were
  // pure cost.
  // A bucket with no verified draft yet is probed at most once per step's worth of decisions:
  // its first decode step at batch 64 would otherwise probe all 64 requests (each paying a
  // draft catch-up) before the first verification is seen.
  const int64_t period =
      (acc.verifies == 0 ? 1 : static_cast<int64_t>(config_.probe_every)) * std::max(batch, 1);
  const bool due = (acc.verifies == 0 && acc.never_probed) || ++acc.since_probe >= period;
  if (best_shape.depth == 0 && max_k > 0 && due &&
      AcceptanceCouldPay(batch, in_bucket, other_drafts, max_k)) {
    acc.since_probe = 0;
    acc.never_probed = false;
    // Re-probe a switched-off bucket with 2 drafts, or 1 where 2 would slow the others too
    // much (AcceptanceCouldPay found some k within the limit).
    best_shape = {std::min(2, max_k), 0, 0};
    if (best_shape.depth > 1 && !OthersAllow(best_shape.depth, batch, in_bucket, other_drafts)) {
      best_shape.depth = 1;
    }
  }
  acc.last_k = best_shape.depth;
  return best_shape;
}

void SpecPolicy::ObserveVerify(metrics::BucketId bucket, int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  Acc& acc = At(bucket);
  ++acc.verifies;
  // Geometric model: `accepted` successes, then one failure unless all passed.
  const double w = std::pow(config_.decay, proposed);
  acc.accepted = acc.accepted * w + accepted;
  acc.rejected = acc.rejected * w + (accepted < proposed ? 1 : 0);
}

void SpecPolicy::ObserveStep(int32_t tokens, double seconds) {
  if (tokens > 0) steps_.Observe(tokens, seconds);
}

void SpecPolicy::ObserveDraft(int32_t rounds, double seconds, int32_t requests) {
  if (rounds <= 0) return;
  drafts_.Observe(std::max(requests, 1), seconds / rounds);
  draft_measured_ = true;
}

double SpecPolicy::DraftRoundSeconds(int32_t requests) const {
  // A round's cost grows with its requests (their tokens go through the draft model
  // together): priced from batch-1 rounds alone, a bucket turned on for many requests looked
  // far cheaper than it was, and large batches lost throughput (bench/NOTES.md).
  double value, top_n, top_s;
  if (drafts_.Within(requests, &value, &top_n, &top_s)) return value;
  return top_n < 0 ? 0 : top_s * requests / top_n;  // beyond: proportional
}

}  // namespace tarmac::speculative
