// A chat request's tools: `tools` (function tools with JSON Schema parameters), `tool_choice`
// ("none", "auto", "required", or {"type": "function", "function": {"name"}}) and
// `parallel_tool_calls`, validated into router::ToolUse. Inconsistent requests are 400s naming
// the field: a tool_choice or parallel_tool_calls without tools, a named function not among
// them, an empty tool_choice object, duplicate names, a parameter schema the grammar compiler
// refuses (naming tools[i].function.parameters and the construct). Pure; thread-safe.
#pragma once

#include <optional>

#include "router/generation_spec.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace tarmac::server {

inline constexpr int kMaxTools = 128;

// Reads tools, tool_choice and parallel_tool_calls of body j. *template_tools: the tools array
// as the chat template sees it (null when none).
// max_whitespace: per gap in the forced calls' JSON (ParseDefaults).
std::optional<ApiError> ParseToolUse(const Json& j, int32_t max_whitespace, router::ToolUse* out, Json* template_tools);

}  // namespace tarmac::server
