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

#include "sampling/sampler.h"
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

struct PromptInput {
  bool is_ids = false;
  std::string text;
  std::vector<int32_t> ids;
};

struct GenRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;
  std::vector<PromptInput> prompts;      // completions: one or more prompts
  nlohmann::ordered_json messages;       // chat: messages with content flattened to strings
  nlohmann::ordered_json tools;          // chat: null or the tools array (passed to the template)
  bool add_generation_prompt = true;
  std::optional<int32_t> max_tokens;     // max_tokens / max_completion_tokens
  int32_t n = 1;
  sampling::SamplingParams sampling;     // vocabulary-dependent checks still to do
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;            // stream_options.include_usage
  bool logprobs = false;                 // report the chosen token's logprob
  std::string user;
  int32_t priority = 0;                  // smaller is more important
  bool speculative = true;               // tarmac extension: false turns speculation off
  std::string task;                      // tarmac extension: request bucket's task type
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

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};
std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, DetokenizeRequest* out);

}  // namespace tarmac::server
