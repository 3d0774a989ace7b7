#include "sampling/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "base/check.h"
#include "kernels/ops.h"

namespace tarmac::sampling {

Status SamplingParams::Validate(int32_t n_vocab) const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature) || temperature > 100.0f)
    return InvalidField("temperature", "temperature must be in [0, 100], got {}", temperature);
  if (top_k < 0) return InvalidField("top_k", "top_k must be >= 0, got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f))
    return InvalidField("top_p", "top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    return InvalidField("min_p", "min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return InvalidField("repetition_penalty", "repetition_penalty must be > 0, got {}", repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return InvalidField("presence_penalty", "presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return InvalidField("frequency_penalty", "frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= n_vocab)
      return InvalidField("logit_bias", "logit_bias token {} is outside the vocabulary (0..{})", id, n_vocab - 1);
    if (!(bias >= -100.0f && bias <= 100.0f))
      return InvalidField("logit_bias", "logit_bias for token {} must be in [-100, 100], got {}", id, bias);
  }
  if (top_logprobs < 0 || top_logprobs > 20)
    return InvalidField("top_logprobs", "top_logprobs must be in [0, 20], got {}", top_logprobs);
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed ? *params.seed : std::random_device{}()),
      has_processors_(!params.logit_bias.empty() || params.repetition_penalty != 1.0f ||
                      params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
  TARMAC_CHECK(params.Validate(n_vocab).ok());
}

void Sampler::AddPrompt(std::span<const int32_t> ids) {
  // Only the repetition penalty reads them (params_ never change): a hash-map node per
  // distinct prompt token was most of the cost of admitting a request (bench/NOTES.md).
  if (params_.repetition_penalty == 1.0f) return;
  for (int32_t id : ids) prompt_counts_[id]++;
}

void Sampler::Accept(int32_t id) { output_counts_[id]++; }

void Sampler::ApplyProcessors(std::span<float> logits) const {
  TARMAC_CHECK(static_cast<int32_t>(logits.size()) == n_vocab_);
  for (const auto& [id, bias] : params_.logit_bias) logits[id] += bias;
  if (params_.repetition_penalty != 1.0f) {
    auto penalise = [&](int32_t id) {
      if (id < 0 || id >= n_vocab_) return;
      float& l = logits[id];
      l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    };
    for (const auto& [id, n] : prompt_counts_) penalise(id);
    for (const auto& [id, n] : output_counts_)
      if (!prompt_counts_.count(id)) penalise(id);
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    for (const auto& [id, n] : output_counts_) {
      if (id < 0 || id >= n_vocab_) continue;
      logits[id] -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(n);
    }
  }
}

void Sampler::Distribution(std::span<const float> logits, std::span<float> probs) const {
  TARMAC_CHECK(params_.temperature > 0.0f);
  const int32_t n = n_vocab_;
  const float inv_t = 1.0f / params_.temperature;
  // Candidates sorted by logit, most likely first; top-k bounds how many need sorting.
  std::vector<int32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  const int32_t k = params_.top_k > 0 ? std::min(params_.top_k, n) : n;
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  if (k < n) {
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), by_logit);
  } else {
    std::sort(idx.begin(), idx.end(), by_logit);
  }
  idx.resize(k);
  const float max_l = logits[idx[0]] * inv_t;
  std::vector<double> p(k);
  double sum = 0;
  for (int32_t i = 0; i < k; ++i) {
    p[i] = std::exp(static_cast<double>(logits[idx[i]] * inv_t - max_l));
    sum += p[i];
  }
  int32_t keep = k;
  if (params_.top_p < 1.0f) {
    double cum = 0;
    for (int32_t i = 0; i < k; ++i) {
      cum += p[i] / sum;
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {
    const double threshold = params_.min_p * p[0];
    int32_t m = 1;
    while (m < keep && p[m] >= threshold) ++m;
    keep = m;
  }
  double kept = 0;
  for (int32_t i = 0; i < keep; ++i) kept += p[i];
  std::fill(probs.begin(), probs.end(), 0.0f);
  for (int32_t i = 0; i < keep; ++i) probs[idx[i]] = static_cast<float>(p[i] / kept);
}

int32_t ArgMax(std::span<const float> x) {
  TARMAC_CHECK(!x.empty());
  // Vectorized: greedy decoding runs this over the whole vocabulary for every token on the
  // engine thread while the pool's other threads wait (bench/NOTES.md).
  return static_cast<int32_t>(kernels::ArgMax(x.data(), static_cast<int64_t>(x.size())));
}

void TopLogprobs(std::span<const float> logits, int32_t n, int32_t chosen, SampleResult* out) {
  // Vectorized (kernels::LogSumExp) rather than in double: this runs on the engine thread for
  // every token of every request while the other cores wait (bench/NOTES.md).
  const float log_z = kernels::LogSumExp(logits.data(), static_cast<int64_t>(logits.size()));
  out->logprob = logits[chosen] - log_z;
  out->top.clear();
  if (n <= 0) return;
  n = std::min<int32_t>(n, static_cast<int32_t>(logits.size()));
  // One pass keeping the n largest, most likely first (equal logits: the lower id first, as
  // ids are visited in order and a later equal one ranks after): most logits fail the first
  // comparison, so a cascade's 2 alternatives per token cost about one read of the row.
  constexpr int32_t kMaxTop = 32;
  TARMAC_CHECK(n <= kMaxTop);
  std::array<int32_t, kMaxTop + 1> top;
  int32_t size = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
    const float v = logits[i];
    if (size == n && !(v > logits[top[static_cast<size_t>(size - 1)]])) continue;
    int32_t at = size;
    while (at > 0 && v > logits[top[static_cast<size_t>(at - 1)]]) {
      top[static_cast<size_t>(at)] = top[static_cast<size_t>(at - 1)];
      --at;
    }
    top[static_cast<size_t>(at)] = i;
    if (size < n) ++size;
  }
  for (int32_t t = 0; t < size; ++t) out->top.push_back({top[static_cast<size_t>(t)], logits[top[static_cast<size_t>(t)]] - log_z});
}

SampleResult Sampler::Sample(std::span<float> logits, const grammar::TokenBitmask* mask) {
  // Logprobs describe the model's own distribution, before any processing: a copy of the row
  // when processors or a mask change it.
  std::vector<float> raw;
  const bool changed = has_processors_ || mask != nullptr;
  if (changed) raw.assign(logits.begin(), logits.end());
  if (mask != nullptr) mask->ApplyToLogits(logits);
  ApplyProcessors(logits);
  SampleResult r;
  if (params_.temperature == 0.0f) {
    r.id = ArgMax(logits);
  } else {
    std::vector<float> probs(n_vocab_);
    Distribution(logits, probs);
    const double u = rng_.Uniform();
    double cum = 0;
    r.id = -1;
    int32_t last_nonzero = 0;
    for (int32_t i = 0; i < n_vocab_; ++i) {
      if (probs[i] <= 0.0f) continue;
      last_nonzero = i;
      cum += probs[i];
      if (u < cum) {
        r.id = i;
        break;
      }
    }
    if (r.id < 0) r.id = last_nonzero;  // rounding left u just above the total
  }
  TopLogprobs(changed ? std::span<const float>(raw) : std::span<const float>(logits), params_.top_logprobs, r.id, &r);
  return r;
}

}  // namespace tarmac::sampling
