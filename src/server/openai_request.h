// Parsing and validating the JSON bodies of POST /v1/completions and /v1/chat/completions
// into a GenRequest. Everything that can be checked without the model is checked here, and
// every error names the parameter (OpenAI's error JSON `param`); checks that need the model
// (vocabulary range of token ids and logit_bias keys, context length) happen when the request
// is bound to a model (generation.h).
//
// Pure functions over plain values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "router/generation_spec.h"
#include "server/api_error.h"

namespace tarmac::server {

enum class ApiKind { kCompletion, kChat };

// Hard limits on request shape (beyond these: 400 naming the parameter).
inline constexpr int kMaxN = 16;              // choices per prompt
inline constexpr int kMaxPrompts = 32;        // prompts in one /v1/completions batch
inline constexpr int kMaxStop = 16;           // stop strings
inline constexpr int kMaxStopBytes = 512;     // bytes per stop string
inline constexpr int kMaxLogitBias = 1024;    // logit_bias entries
inline constexpr int kMaxMessages = 4096;
inline constexpr int kMaxJsonDepth = 64;     // nesting of the request body

struct GenRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;
  router::GenerationSpec spec;           // what to generate (vocabulary-dependent checks still to do)
  bool stream = false;
  bool include_usage = false;            // stream_options.include_usage
  bool logprobs = false;                 // report the chosen token's logprob
  std::string user;
  // Scoped caches (tarmac extensions).
  bool cache_asked = false;              // `cache`: true or {ttl_s}: cache this response
  bool cache_refused = false;            // `cache`: false: neither look up nor store
  std::optional<double> cache_ttl_s;     // `cache.ttl_s`
  std::string session_id;                // "" : none
  std::string locale;                    // "" : none (then Accept-Language)
  // Every parameter that can change the output (the body without model, prompt / messages,
  // stream, stream_options, user, cache, session_id and locale): part of the response cache's key.
  nlohmann::json key_params;
};

// Parses and validates `body`. On error returns the ApiError (status 400).
std::optional<ApiError> ParseGenRequest(std::string_view body, ApiKind kind, GenRequest* out);

// POST /tokenize and /detokenize bodies.
struct TokenizeRequest {
  std::string model;
  bool is_chat = false;
  std::string prompt;
  nlohmann::ordered_json messages;
  bool add_special_tokens = true;
  bool add_generation_prompt = true;
};
std::optional<ApiError> ParseTokenizeRequest(std::string_view body, TokenizeRequest* out);

// POST /v1/feedback: a score in [0, 1] for a routed response.
struct FeedbackRequest {
  std::string id;
  double score = 0;
};
std::optional<ApiError> ParseFeedbackRequest(std::string_view body, FeedbackRequest* out);

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};
std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, DetokenizeRequest* out);

}  // namespace tarmac::server
