// Chat `messages` of a request: validated (roles, content, a tool message's tool_call_id, an
// assistant message's tool_calls) and shaped for chat templates: content parts flattened to
// one string, and each tool call's `arguments` (a JSON string in OpenAI's API) parsed into the
// object templates expect (Hugging Face's convention; `tool_call.arguments | tojson`). Errors
// name the field, e.g. messages[2].tool_calls[0].function.arguments. Pure; thread-safe.
#pragma once

#include <optional>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace tarmac::server {

inline constexpr int kMaxMessages = 4096;

// Reads j["messages"] into *out (an array of validated messages).
std::optional<ApiError> ParseMessages(const Json& j, Json* out);

}  // namespace tarmac::server
