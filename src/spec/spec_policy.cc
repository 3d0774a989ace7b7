#include "spec/spec_policy.h"

#include <algorithm>
#include <cmath>

namespace tarmac::spec {

SpecPolicy::SpecPolicy(const SpecPolicyConfig& config) : config_(config) {
  config_.max_k = std::clamp(config_.max_k, 0, kMaxDraft);
}

int SpecPolicy::Bin(int32_t tokens) {
  int b = 0;
  while ((1 << (b + 1)) <= tokens && b < 15) ++b;
  return b;
}

double SpecPolicy::StepSeconds(int32_t tokens) const {
  // Piecewise linear through the measured (mean tokens, mean seconds) of each bin; below
  // them, proportional to tokens. Above them a guess, replaced by the measurement of the
  // first step of that size: with one measurement, proportional (the pessimistic guess);
  // otherwise along the slope from the largest measurement back to one at most half its
  // size, but no less than 3/4 of the proportional slope. A bandwidth-bound step has a large
  // fixed part (the padded 0.58B model: 45 ms at 1 token, ~95 at 8), which the proportional
  // guess scaled up too (190 ms at 16), so batch 8 never speculated; nearby sizes' noise
  // (wp-11m: 4.48 ms at 58 tokens, 4.40 at 64) must not make larger steps look free.
  double prev_t = -1, prev_s = 0;
  for (int b = 0; b < 16; ++b) {
    if (step_tokens_[b] <= 0) continue;
    const double t = step_tokens_[b], sec = step_s_[b];
    if (tokens <= t) {
      if (prev_t < 0) return sec * tokens / t;  // below every measurement: assume proportional
      return prev_s + (tokens - prev_t) / (t - prev_t) * (sec - prev_s);
    }
    prev_t = t;
    prev_s = sec;
  }
  if (prev_t < 0) return 0;
  double base_t = -1, base_s = 0;  // the largest measurement at most half of prev_t
  for (int b = 0; b < 16; ++b) {
    if (step_tokens_[b] > 0 && step_tokens_[b] <= prev_t / 2) {
      base_t = step_tokens_[b];
      base_s = step_s_[b];
    }
  }
  if (base_t < 0) return prev_s * tokens / prev_t;
  const double slope =
      std::max((prev_s - base_s) / (prev_t - base_t), 0.75 * prev_s / prev_t);
  return prev_s + slope * (tokens - prev_t);
}

bool SpecPolicy::AcceptanceCouldPay(int32_t batch, int32_t in_bucket) const {
  // Nothing measured (the decode step, or the draft): find out.
  if (StepSeconds(std::max(batch, 1)) <= 0 || !draft_measured_) return true;
  for (int32_t k = 1; k <= config_.max_k; ++k) {
    if (PredictSpeedup(kProbeAcceptance, k, batch, in_bucket) > 1.0 + config_.min_gain) return true;
  }
  return false;
}

double SpecPolicy::PredictSpeedup(double a, int32_t k, int32_t batch, int32_t in_bucket) const {
  if (k <= 0) return 1.0;
  if (in_bucket < 0 || in_bucket > batch) in_bucket = batch;
  a = std::clamp(a, 0.0, 0.999);
  const double expected = (1.0 - std::pow(a, k + 1)) / (1.0 - a);
  const double decode = StepSeconds(batch);
  const double verify = StepSeconds(batch + k * in_bucket);
  const double draft = k * DraftRoundSeconds(std::max(in_bucket, 1));
  // Nothing measured yet (no decode step of this size, no draft round): probing finds out.
  if (decode <= 0 || verify <= 0 || !draft_measured_) return 1.0;
  return expected * decode / (draft + verify);
}

int32_t SpecPolicy::ChooseK(const std::string& bucket, int32_t batch, int32_t in_bucket) {
  BucketStats& st = buckets_[bucket];
  Acc& acc = acc_[bucket];
  ++st.decisions;
  const double a = acc.accepted / (acc.accepted + acc.rejected);
  st.accept_est = a;
  int32_t best_k = 0;
  double best = 1.0 + config_.min_gain;
  // Until a draft of this bucket has been verified its acceptance is only the prior: the
  // model is not acted on for every request (at batch 41 that was 41 draft catch-ups on a
  // guess); the probe below measures it.
  for (int32_t k = 1; st.drafts > 0 && k <= config_.max_k; ++k) {
    const double s = PredictSpeedup(a, k, batch, in_bucket);
    if (s > best) {
      best = s;
      best_k = k;
    }
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
      (st.drafts == 0 ? 1 : static_cast<int64_t>(config_.probe_every)) * std::max(batch, 1);
  const bool due = (st.drafts == 0 && acc.never_probed) || ++acc.since_probe >= period;
  if (best_k == 0 && config_.max_k > 0 && due && AcceptanceCouldPay(batch, in_bucket)) {
    acc.since_probe = 0;
    acc.never_probed = false;
    best_k = std::min(2, config_.max_k);  // re-probe a switched-off bucket
  }
  if (best_k == 0) ++st.fallbacks;
  st.last_k = best_k;
  return best_k;
}

void SpecPolicy::ObserveVerify(const std::string& bucket, int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  BucketStats& st = buckets_[bucket];
  Acc& acc = acc_[bucket];
  ++st.drafts;
  st.draft_tokens += proposed;
  st.accepted_tokens += accepted;
  for (int32_t i = 0; i < accepted && i < kMaxDraft; ++i) ++st.accepted_at[i];
  // Geometric model: `accepted` successes, then one failure unless all passed.
  const double w = std::pow(config_.decay, proposed);
  acc.accepted = acc.accepted * w + accepted;
  acc.rejected = acc.rejected * w + (accepted < proposed ? 1 : 0);
  st.accept_est = acc.accepted / (acc.accepted + acc.rejected);
}

void SpecPolicy::ObserveStep(int32_t tokens, double seconds) {
  if (tokens <= 0) return;
  const int b = Bin(tokens);
  if (step_tokens_[b] == 0) {
    step_s_[b] = seconds;
    step_tokens_[b] = tokens;
    return;
  }
  step_s_[b] = 0.9 * step_s_[b] + 0.1 * seconds;
  step_tokens_[b] = 0.9 * step_tokens_[b] + 0.1 * tokens;
}

void SpecPolicy::ObserveDraft(int32_t rounds, double seconds, int32_t requests) {
  if (rounds <= 0) return;
  const double per = seconds / rounds;
  const int b = Bin(std::max(requests, 1));
  if (draft_reqs_[b] == 0) {
    draft_s_[b] = per;
    draft_reqs_[b] = std::max(requests, 1);
  } else {
    draft_s_[b] = 0.9 * draft_s_[b] + 0.1 * per;
    draft_reqs_[b] = 0.9 * draft_reqs_[b] + 0.1 * std::max(requests, 1);
  }
  draft_measured_ = true;
}

double SpecPolicy::DraftRoundSeconds(int32_t requests) const {
  // A round's cost grows with its requests (their tokens go through the draft model
  // together). Priced from batch-1 rounds alone, turning a bucket on for 49 requests looked
  // like 1/49 of its real drafting cost and lost 6-9% at batch 32-64.
  double prev_n = -1, prev_s = 0;
  for (int b = 0; b < 16; ++b) {
    if (draft_reqs_[b] <= 0) continue;
    const double n = draft_reqs_[b], sec = draft_s_[b];
    if (requests <= n) {
      if (prev_n < 0) return sec * requests / n;
      return prev_s + (requests - prev_n) / (n - prev_n) * (sec - prev_s);
    }
    prev_n = n;
    prev_s = sec;
  }
  return prev_n < 0 ? 0 : prev_s * requests / prev_n;
}

}  // namespace tarmac::spec
