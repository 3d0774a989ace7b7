// OpenAiRenderer: a generation's events as OpenAI's JSON. It accumulates each choice (text,
// logprobs, finish reason, metrics) from the token events and writes the SSE chunks of a
// streamed response as events arrive, or the one response body at the end; both come from the
// same accumulated state, so streamed and non-streamed output are identical for the same seed.
//
// Not thread-safe: one generation job owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_types.h"
#include "server/api_error.h"
#include "router/target.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace tarmac::server {

struct ChoiceState {
  int32_t index = 0;
  int32_t prompt_index = 0;
  std::string text;
  int32_t text_bytes_logged = 0;               // completions text_offset bookkeeping
  nlohmann::ordered_json logprobs;             // accumulated (null when not requested)
  engine::FinishReason finish = engine::FinishReason::kNone;
  engine::RequestMetrics metrics;
  std::string error;
  bool done() const { return finish != engine::FinishReason::kNone; }
};

class OpenAiRenderer {
 public:
  // n: choices per prompt (usage counts each prompt's cached tokens once).
  OpenAiRenderer(ApiKind kind, bool stream, bool include_usage, bool logprobs, int32_t n);

  // The model that answers: its name goes into every chunk and body; its tokenizer renders
  // logprob pieces. Preconditions: called before the first event; tokenizer outlives this.
  void SetModel(std::string name, const tok::Tokenizer* tokenizer);
  // A routed response's route, written as the `tarmac` object into the body and into each
  // choice's last chunk.
  void SetRoute(const std::optional<router::RouteInfo>& info);
  const std::string& id() const { return id_; }
  // One choice per entry of prompt_index; prompt_tokens per prompt (for usage).
  void SetChoices(const std::vector<int32_t>& prompt_index, std::vector<int64_t> prompt_tokens);

  // Applies choice i's next event; when streaming, appends its SSE frame ("data: ...\n\n") to
  // *sse (events with nothing to say add nothing).
  void OnEvent(size_t i, engine::TokenEvent ev, std::string* sse);

  std::string StreamPrelude() const;   // chat: the role chunk of every choice
  std::string StreamEpilogue() const;  // usage chunk (if asked), then "data: [DONE]"
  std::string ResponseBody() const;    // non-streamed body
  // The first engine error of a finished generation, if any (e.g. the engine shut down).
  std::optional<ApiError> EngineError() const;

  const std::vector<ChoiceState>& choices() const { return choices_; }
  bool all_done() const;

 private:
  nlohmann::ordered_json ChunkBase() const;
  nlohmann::ordered_json Usage() const;
  nlohmann::ordered_json EmptyLogprobs() const;
  nlohmann::ordered_json LogprobEntry(const engine::TokenEvent& ev, std::string* piece) const;
  void AppendLogprobs(nlohmann::ordered_json* lp, int32_t* bytes_logged, const nlohmann::ordered_json& entry,
                      const std::string& piece) const;

  const ApiKind kind_;
  const bool stream_, include_usage_, logprobs_;
  const int32_t n_;
  const std::string id_;
  const int64_t created_;
  std::string model_;
  const tok::Tokenizer* tok_ = nullptr;
  std::vector<ChoiceState> choices_;
  std::vector<int64_t> prompt_tokens_;
  nlohmann::ordered_json route_;  // null: not routed
};

// The `tarmac` object of a routed response, and its x-tarmac-route header value.
nlohmann::ordered_json RouteJson(const router::RouteInfo& info);
std::string RouteHeader(const router::RouteInfo& info);

// Serialises JSON as one line, replacing invalid UTF-8 (partial characters of byte tokens).
std::string DumpJson(const nlohmann::ordered_json& j);

}  // namespace tarmac::server
