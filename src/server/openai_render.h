// OpenAiRenderer: a generation's events as OpenAI's JSON. It accumulates each choice (text,
// logprobs, tool calls, finish reason, metrics) from the token events and writes the SSE
// chunks of a streamed response as events arrive, or the one response body at the end; both
// come from the same accumulated state, so streamed and non-streamed output are identical for
// the same seed.
//
// Completions logprobs: `top_logprobs` always holds the sampled token (with logprobs: 0 only
// it); a token whose bytes are not valid UTF-8 (a partial character) is written as
// "bytes:\xNN..." (OpenAI's form) in `tokens` and as its key, so such alternatives keep
// distinct keys. `echo` puts the prompt (and, with logprobs, its tokens, the first one's
// logprob null) before the first choice text. Chat choices with tools parse their text into
// tool_calls (ToolCallRender); finish_reason is "tool_calls" when a call was made (not for a
// named tool_choice, as OpenAI). stream_options.continuous_usage_stats puts the usage so far in
// every chunk.
//
// Not thread-safe: one generation job owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_types.h"
#include "router/target.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/tool_call_render.h"
#include "tokenizer/tokenizer.h"

namespace tarmac::server {

struct ChoiceState {
  int32_t index = 0;
  int32_t prompt_index = 0;
  std::string text;                            // content (chat: without tool calls)
  int32_t tokens = 0;                          // token events so far
  int32_t text_bytes_logged = 0;               // completions text_offset bookkeeping
  std::shared_ptr<ToolCallRender> tools;       // chat with tools: from the first event on
  bool started = false;                        // its first event was seen
  nlohmann::ordered_json logprobs;             // accumulated (null when not requested)
  engine::FinishReason finish = engine::FinishReason::kNone;
  engine::RequestMetrics metrics;
  std::string error;
  StatusCode error_code = StatusCode::kOk;     // of the engine's error
  bool done() const { return finish != engine::FinishReason::kNone; }
};

// What a choice that ended in an engine error answers: 500 for an internal error (the
// request's processing failed), else 503 with Retry-After (the engine stopped or was full).
ApiError ChoiceError(const ChoiceState& c);

class OpenAiRenderer {
 public:
  // What the request asked for (kind, streaming, usage, logprobs, n, echo, tools).
  explicit OpenAiRenderer(const GenRequest& req);

  // The model that answers: its name goes into every chunk and body; its tokenizer renders
  // logprob pieces; its tool-call format parses tool calls. Preconditions: called before the
  // first event; the model outlives this.
  void SetModel(const router::PoolModel& model);
  // A routed response's route, written as the `tarmac` object into the body and into each
  // choice's last chunk.
  void SetRoute(const std::optional<router::RouteInfo>& info);
  const std::string& id() const { return id_; }
  // One choice per entry of prompt_index; each prompt's token ids (usage, echo).
  void SetChoices(const std::vector<int32_t>& prompt_index, std::vector<std::vector<int32_t>> prompts);

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
  // final: the finished response's (metrics); else the tokens so far (continuous usage).
  nlohmann::ordered_json Usage(bool final) const;
  nlohmann::ordered_json EmptyLogprobs() const;
  nlohmann::ordered_json LogprobEntry(int32_t token, float logprob, const std::vector<sampling::TokenLogprob>& top,
                                      bool has_logprob) const;
  void AppendLogprobs(nlohmann::ordered_json* lp, int32_t* bytes_logged, const nlohmann::ordered_json& entry,
                      int32_t token) const;
  // The echoed prompt of choice c (text, and logprobs into both *lp_delta and c's).
  std::string Echo(ChoiceState& c, const engine::TokenEvent& ev, nlohmann::ordered_json* lp_delta);
  nlohmann::ordered_json ChatDelta(ChoiceState& c, const engine::TokenEvent& ev, const std::string& text);
  nlohmann::ordered_json FinishJson(const ChoiceState& c) const;

  const ApiKind kind_;
  const bool stream_, include_usage_, continuous_usage_, logprobs_, echo_;
  const int32_t n_;
  const router::ToolUse tool_use_;
  const std::vector<router::PromptInput> prompt_inputs_;  // echo: the prompts as given
  const std::string id_;
  const int64_t created_;
  std::string model_;
  const tok::Tokenizer* tok_ = nullptr;
  grammar::ToolCallFormat tool_format_ = grammar::ToolCallFormat::kNone;
  std::vector<ChoiceState> choices_;
  std::vector<std::vector<int32_t>> prompts_;  // per prompt: its token ids
  nlohmann::ordered_json route_;  // null: not routed
};

// The `tarmac` object of a routed response, and its x-tarmac-route header value.
nlohmann::ordered_json RouteJson(const router::RouteInfo& info);
std::string RouteHeader(const router::RouteInfo& info);

// Serialises JSON as one line, replacing invalid UTF-8 (partial characters of byte tokens).
std::string DumpJson(const nlohmann::ordered_json& j);

// A token's text in completions logprobs: the piece when it is valid UTF-8, else OpenAI's
// "bytes:\xNN..." spelling of its bytes.
std::string LogprobTokenString(const std::string& piece);

}  // namespace tarmac::server
