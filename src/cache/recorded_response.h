// RecordedResponse: a finished generation as the response cache keeps it: which model
// answered (and by which route), the prompts' token counts, and every event of every choice
// exactly as the renderer consumed it. Replaying the events through the same renderer gives
// the same text, logprobs, chunks and finish reasons a miss produced.
//
// Stored as CBOR (nlohmann); Decode checks every field (an entry written by another version or
// damaged in the shared tier is an error, which callers treat as a miss). Plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/engine_types.h"
#include "router/target.h"

namespace tarmac::cache {

struct RecordedResponse {
  std::string model;                       // the model that answered
  std::optional<router::RouteInfo> route;  // routed requests: how
  std::vector<int32_t> prompt_index;       // [choices] which prompt each continues
  std::vector<int64_t> prompt_tokens;      // [prompts]
  std::vector<std::vector<engine::TokenEvent>> choices;  // [choices][events]; each ends finished

  int64_t total_prompt_tokens() const;
  int64_t total_output_tokens() const;     // sampled tokens over all choices
};

std::string EncodeRecorded(const RecordedResponse& r);
Result<RecordedResponse> DecodeRecorded(std::string_view bytes);

}  // namespace tarmac::cache
