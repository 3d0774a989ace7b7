// Token sampling: logits processors (a grammar's token mask, logit bias, repetition / presence /
// frequency penalties), temperature, top-k, top-p, min-p, greedy, seeded sampling, top-n logprobs.
//
// Order of operations (as OpenAI-compatible servers apply them): grammar mask -> logit bias -> penalties over
// the request's history -> (temperature == 0: argmax) -> temperature -> top-k -> softmax ->
// top-p -> min-p -> renormalise -> draw. The same pipeline gives the distribution used by
// speculative verification, so p and q see identical transforms.
//
// Sampler owns one request's RNG and penalty counts; not thread-safe (one per request).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "grammar/token_bitmask.h"
#include "sampling/rng.h"

namespace tarmac::sampling {

struct SamplingParams {
  float temperature = 1.0f;          // 0: greedy
  int32_t top_k = 0;                 // 0: off
  float top_p = 1.0f;                // 1: off
  float min_p = 0.0f;                // 0: off; keep tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;   // 1: off; >1 discourages tokens already seen
  float presence_penalty = 0.0f;     // subtracted once from tokens seen in the output
  float frequency_penalty = 0.0f;    // subtracted per occurrence in the output
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to logits, ids < n_vocab
  std::optional<uint64_t> seed;      // none: seeded from a random device
  int32_t top_logprobs = 0;          // number of alternatives to report (0..20)

  // Names the first invalid field, e.g. "top_p must be in (0, 1], got 1.5".
  Status Validate(int32_t n_vocab) const;
};

struct TokenLogprob {
  int32_t id;
  float logprob;  // natural log of the model's probability (before temperature/filters)
};

struct SampleResult {
  int32_t id = -1;
  float logprob = 0.0f;              // of the chosen token, as TokenLogprob
  std::vector<TokenLogprob> top;     // top_logprobs alternatives, most likely first
};

class Sampler {
 public:
  // Preconditions: params.Validate(n_vocab).ok().
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // Records prompt tokens (repetition penalty applies to them, as in llama.cpp and vLLM;
  // presence/frequency count only generated tokens, as in OpenAI's definition).
  void AddPrompt(std::span<const int32_t> ids);
  // Records a generated (accepted) token.
  void Accept(int32_t id);

  // Samples one token. logits: [n_vocab], modified in place (processed logits). mask (a
  // grammar's allowed tokens, optional) sets every other logit to -inf before the processors;
  // logprobs stay the model's own (unmasked). Preconditions: mask allows at least one token.
  SampleResult Sample(std::span<float> logits, const grammar::TokenBitmask* mask = nullptr);

  // Applies bias and penalties in place (first stage of Sample).
  void ApplyProcessors(std::span<float> logits) const;
  // Final distribution after temperature/top-k/top-p/min-p: probs [n_vocab], zeros where
  // filtered, sums to 1. Preconditions: temperature > 0; logits already processed.
  void Distribution(std::span<const float> logits, std::span<float> probs) const;

  const SamplingParams& params() const { return params_; }
  Rng& rng() { return rng_; }

 private:
  SamplingParams params_;
  int32_t n_vocab_;
  Rng rng_;
  std::unordered_map<int32_t, int32_t> prompt_counts_;
  std::unordered_map<int32_t, int32_t> output_counts_;
  bool has_processors_;  // bias or penalties change the logits (Sample then keeps a raw copy)
};

// Index of the largest value (first among equals; kernels::ArgMax). Preconditions: !x.empty(),
// no NaN (a NaN row still yields an index in range).
int32_t ArgMax(std::span<const float> x);
// log-softmax of x at the given ids, and the top-n of x, most likely first.
void TopLogprobs(std::span<const float> logits, int32_t n, int32_t chosen, SampleResult* out);

}  // namespace tarmac::sampling
