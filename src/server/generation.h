// Generation: one /v1/completions or /v1/chat/completions request bound to a model: prompt
// encoding and model-dependent checks (Prepare), submission of its n x prompts engine requests
// (Start), and the conversion of their token events into OpenAI JSON: SSE chunks while
// streaming, or one response body at the end. Streamed and non-streamed output are built from
// the same accumulated events, so they are identical for the same seed.
//
// Not thread-safe: owned by one HTTP session on the server's I/O thread. The engine calls the
// notifier given to Start from its own thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/served_model.h"

namespace tarmac::server {

struct Choice {
  int32_t index = 0;
  int32_t prompt_index = 0;
  engine::EngineRequest request;
  std::shared_ptr<engine::RequestStream> stream;
  std::string text;
  int32_t text_bytes_logged = 0;               // completions text_offset bookkeeping
  nlohmann::ordered_json logprobs;             // accumulated (null when not requested)
  engine::FinishReason finish = engine::FinishReason::kNone;
  engine::RequestMetrics metrics;
  std::string error;
  bool done() const { return finish != engine::FinishReason::kNone; }
};

class Generation {
 public:
  Generation(GenRequest req, ServedModel* model, std::string tenant);

  // Encodes prompts (chat: through the chat formatter), checks token ids, logit_bias and
  // stop_token_ids against the vocabulary and prompt + max_tokens against the context, and
  // builds the engine requests. Errors are 400s naming the parameter.
  std::optional<ApiError> Prepare();
  // prompt + max_tokens over all choices (for the admission queue).
  int64_t admission_tokens() const { return admission_tokens_; }
  int32_t priority() const { return req_.priority; }
  bool streaming() const { return req_.stream; }

  // Submits every choice. On error nothing stays submitted.
  std::optional<ApiError> Start(const std::function<void()>& notify);
  bool started() const { return started_; }
  // Drains available events. When streaming, appends SSE frames ("data: ...\n\n") to *sse.
  // Returns true once every choice has finished.
  bool Poll(std::string* sse);
  void CancelAll();

  std::string StreamPrelude() const;   // chat: the role chunk of every choice
  std::string StreamEpilogue() const;  // usage chunk (if asked), then "data: [DONE]"
  std::string ResponseBody() const;    // non-streamed body
  // The first engine error of a finished generation, if any (e.g. the engine shut down).
  std::optional<ApiError> EngineError() const;

  const std::vector<Choice>& choices() const { return choices_; }
  RequestBucket BucketOf(const Choice& c) const;
  const ServedModel& model() const { return *model_; }

 private:
  nlohmann::ordered_json ChunkBase() const;
  nlohmann::ordered_json Usage() const;
  nlohmann::ordered_json LogprobEntry(Choice& c, const engine::TokenEvent& ev, std::string* piece) const;
  void AppendLogprobs(Choice& c, const nlohmann::ordered_json& entry, const std::string& piece) const;

  GenRequest req_;
  ServedModel* model_;
  std::string tenant_;
  std::string id_;
  int64_t created_;
  std::vector<std::vector<int32_t>> prompt_ids_;
  std::vector<Choice> choices_;
  int64_t admission_tokens_ = 0;
  bool started_ = false;
};

// Serialises JSON as one line, replacing invalid UTF-8 (partial characters of byte tokens).
std::string DumpJson(const nlohmann::ordered_json& j);

}  // namespace tarmac::server
