// SpecPolicy: chooses the draft length k per request bucket from measured acceptance and
// measured costs, using speedup(k) = E[tokens per verify](k) · C_decode / (C_draft(k) +
// C_verify(k)), where
//   E(k)       = (1 - a^(k+1)) / (1 - a), a the bucket's per-position acceptance estimate
//                (accepted drafts / (accepted drafts + rejections), exponentially decayed);
//   C_decode   = target step time at the current decode batch B (measured);
//   C_verify   = target step time at B·(1 + k) tokens (measured; the table is filled as steps
//                of different sizes run, so the compute-bound break-even is measured, not
//                assumed);
//   C_draft(k) = k · measured draft time per draft position.
// k = 0 (off) when no k in 1..max_k beats 1 + min_gain, and no k whose verification (and
// drafting) would slow the step of the batch's other requests by more than max_other_slowdown:
// they share the step, so a bucket's draft tokens lengthen every other request's TPOT, and
// where verify tokens are not free (a compute-bound step) a low-acceptance bucket's p99
// would pay for another bucket's gain. Buckets that are off are re-probed
// (k = 2, one request) about every probe_every engine steps so a bucket can recover, unless
// even acceptance kProbeAcceptance would not pay at the current batch (then only the step
// costs keep it off, and a probe, which measures acceptance, could not change that).
//
// Token trees (config max_width > 0): the draft's spine of k tokens, and at each of its first
// `branch` positions `width` more candidates (siblings: the draft's next-best tokens, or more
// draws from q) verified in the same step (SpecInfer). With h(w) the bucket's measured chance
// that the target's token at a position where the spine was rejected is among the first w
// siblings (decayed counts, measured at every rejection for every w up to max_width, so
// widths not in use are priced too),
//   E(shape) = Σ_{d=1..k} a^(d-1) (1 - a) (d + h(w_d)) + a^k (k + 1)
// (a sibling hit adds its token and the bonus token its row gives), the verify step has
// k + Σ w_d tokens per request (at most max_tree_tokens) and drafting still k rounds (the
// siblings come from the spine's distributions). The best shape over chains and trees wins.
// A shape whose verify step size (log2 bin) has fewer than 3 measurements is probed about
// once per probe_every / 4 steps while, priced at the cost of the largest smaller step
// measured, it would beat the best choice (extrapolated or noisy prices alone would never
// let that size be measured again).
//
// Buckets are metrics::BucketId (the one request-bucket definition). The counts that describe
// speculation (drafts, accepted tokens, decisions, fallbacks) are the engine's metrics; the
// policy keeps only what its decisions need.
//
// Not thread-safe (the engine's step thread).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "metrics/cost_curve.h"
#include "metrics/request_bucket.h"
#include "speculative/token_tree.h"

namespace tarmac::speculative {

struct SpecPolicyConfig {
  int32_t max_k = 4;        // longest draft (the fixed k when the policy is off)
  double decay = 0.98;      // weight kept per observation (older acceptance fades)
  double min_gain = 0.02;   // speculate only when the model predicts > 2% speedup
  int32_t probe_every = 32; // engine steps between probes of a switched-off bucket
  // Most a bucket's speculation may lengthen the step of the batch's requests outside it
  // (0.05: 5%); negative: no limit.
  double max_other_slowdown = 0.05;
  // Token trees: most sibling candidates per branching position (0: chains only), most
  // branching positions, most tree tokens per request (spine + siblings) in a step.
  int32_t max_width = 0;
  int32_t max_branch = 0;
  int32_t max_tree_tokens = 16;
};

constexpr int kMaxDraft = 16;


class SpecPolicy {
 public:
  explicit SpecPolicy(const SpecPolicyConfig& config = {});

  // k for one request of `bucket` when `batch` requests decode this step, `in_bucket` of them
  // (default: all) from this bucket, and other buckets already put `other_drafts` draft
  // tokens into the step: verification then costs a step of batch + other_drafts +
  // k · in_bucket tokens against batch + other_drafts without it, so a high-acceptance bucket
  // can speculate while others in the batch do not, and a bucket deciding after another sees
  // the step that one made.
  // max_k >= 0 caps this decision below config().max_k (a runtime knob); 0 switches it off.
  int32_t ChooseK(metrics::BucketId bucket, int32_t batch, int32_t in_bucket = -1,
                  int32_t other_drafts = 0, int32_t max_k = -1);
  // The same decision over chains and trees (trees when config().max_width > 0 and
  // allow_trees): the shape with the best predicted speedup. other_drafts counts tree tokens.
  TreeShape ChooseShape(metrics::BucketId bucket, int32_t batch, int32_t in_bucket = -1,
                        int32_t other_drafts = 0, int32_t max_k = -1, bool allow_trees = true);
  // After verification: `proposed` drafts, the first `accepted` of them accepted.
  void ObserveVerify(metrics::BucketId bucket, int32_t proposed, int32_t accepted);
  // At a position where the spine's draft was rejected, the target's token was the rank-th
  // of the draft's `known` sibling candidates (0-based; -1: none of them).
  void ObserveSibling(metrics::BucketId bucket, int32_t rank, int32_t known);
  // The bucket's estimate of h(w) (see above): 0 before any observation.
  double SiblingHit(metrics::BucketId bucket, int32_t width) const;
  // A target forward over `tokens` tokens took `seconds`.
  void ObserveStep(int32_t tokens, double seconds);
  // `rounds` draft rounds (one forward each) for `requests` requests took `seconds`.
  void ObserveDraft(int32_t rounds, double seconds, int32_t requests = 1);

  // Expected speedup of k for acceptance a at decode batch B (exposed for tests/benchmarks).
  double PredictSpeedup(double a, int32_t k, int32_t batch, int32_t in_bucket = -1,
                        int32_t other_drafts = 0) const;
  // Of a shape, with sibling hit rates hit[w] (w = 0..kMaxWidth, hit[0] = 0).
  double PredictShapeSpeedup(double a, const std::array<double, kMaxWidth + 1>& hit,
                             const TreeShape& shape, int32_t batch, int32_t in_bucket = -1,
                             int32_t other_drafts = 0) const;
  // E(shape) above: expected tokens per verification.
  static double ExpectedTokens(double a, const std::array<double, kMaxWidth + 1>& hit,
                               const TreeShape& shape);
  double StepSeconds(int32_t tokens) const;  // measured or inferred target step time
  // The target's decode steps: seconds against tokens in the step (thread-safe to read).
  const metrics::CostCurve& step_costs() const { return steps_; }
  // Measured or inferred seconds of one draft round for `requests` requests: piecewise linear
  // through the measured sizes, proportional to requests beyond them (a round for 49
  // requests is not priced as one for 1).
  double DraftRoundSeconds(int32_t requests) const;
  // Whether some k would pay at this batch if acceptance were kProbeAcceptance (or nothing
  // is measured yet) within the others' slowdown limit.
  bool AcceptanceCouldPay(int32_t batch, int32_t in_bucket, int32_t other_drafts = 0,
                          int32_t max_k = -1) const;
  // How much k drafts for each of the bucket's in_bucket requests lengthen the batch's step
  // (draft rounds plus the larger verify step, over the plain decode step): 1 when nothing
  // is measured. What the batch's other requests pay.
  double StepSlowdown(int32_t k, int32_t batch, int32_t in_bucket, int32_t other_drafts = 0) const;
  // The bucket's current per-position acceptance estimate (the prior, 0.5, when unseen).
  double AcceptanceEstimate(metrics::BucketId bucket) const;
  // The k of the bucket's latest decision (0 before any).
  int32_t LastK(metrics::BucketId bucket) const;
  static constexpr double kProbeAcceptance = 0.95;

  const SpecPolicyConfig& config() const { return config_; }

 private:
  struct Acc {
    double accepted = 1.0, rejected = 1.0;  // decayed counts; prior a = 0.5
    int64_t since_probe = 0;   // decisions since the last probe
    bool never_probed = true;
    int64_t verifies = 0;      // verifications seen (with at least one draft)
    int32_t last_k = 0;
    // Sibling hits at rejections: decayed hits[w] of weight total[w] (w = 1..kMaxWidth).
    std::array<double, kMaxWidth + 1> hits{}, seen{};
    bool hit_seen = false;
    int64_t since_tree_probe = 0;  // decisions since the last probe of a barely measured size
    double Estimate() const { return accepted / (accepted + rejected); }
  };
  Acc& At(metrics::BucketId b);  // grown on first use (ids are dense)
  // The decode step (batch + other_drafts tokens), the verify step with k drafts for each of
  // in_bucket requests, and k draft rounds for in_bucket requests, in seconds: false while
  // any of them is unmeasured.
  bool StepCosts(int32_t k, int32_t batch, int32_t in_bucket, int32_t other_drafts,
                 double* decode, double* verify, double* draft, int32_t nodes = -1) const;
  double Speedup(double expected, const TreeShape& shape, int32_t batch, int32_t in_bucket,
                 int32_t other_drafts) const;
  // The shape's speedup if its verify step, of a size whose log2 bin has < 3 observations,
  // cost what the largest smaller step measured does; 0 otherwise.
  double OptimisticSpeedup(double a, const std::array<double, kMaxWidth + 1>& hit, const TreeShape& shape,
                           int32_t batch, int32_t in_bucket, int32_t other_drafts) const;
  // Whether k keeps StepSlowdown within max_other_slowdown (always, with no other requests).
  int32_t MaxK(int32_t cap) const { return cap < 0 ? config_.max_k : std::min(cap, config_.max_k); }
  bool OthersAllow(int32_t k, int32_t batch, int32_t in_bucket, int32_t other_drafts,
                   int32_t nodes = -1) const;
  std::array<double, kMaxWidth + 1> Hits(const Acc& acc) const;

  SpecPolicyConfig config_;
  std::vector<Acc> acc_;  // by bucket id
  metrics::CostCurve steps_;   // target decode steps by tokens
  metrics::CostCurve drafts_;  // draft rounds by requests
  bool draft_measured_ = false;  // a draft round was observed (n-gram rounds may cost ~0 s)
};

}  // namespace tarmac::speculative
