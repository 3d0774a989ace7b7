// Tool-call output formats: how a model writes function calls in its text, picked from the
// chat template's source or named explicitly (vLLM's --tool-call-parser names).
//
//   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call>, one block per call
//                (Hermes 2 Pro, Qwen2.5)
//   llama3_json  {"name": ..., "parameters": {...}} at the start of the output, optionally
//                after <|python_tag|>; several separated by ';' (Llama 3.1-3.3)
//   mistral      [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...], or the v11 form
//                [TOOL_CALLS]name[ARGS]{...}
//
// Pure functions, thread-safe.
#pragma once

#include <string_view>

#include "base/status.h"

namespace tarmac::grammar {

enum class ToolCallFormat {
  kNone,  // no tool calls parsed: the output is content
  kHermes,
  kLlama3Json,
  kMistral,
};

const char* ToolCallFormatName(ToolCallFormat f);
// "hermes", "llama3_json", "mistral", "none"; anything else is an error naming the value.
Result<ToolCallFormat> ParseToolCallFormat(std::string_view name);

// The format a chat template teaches, from the markers its source renders: [TOOL_CALLS] ->
// mistral; <tool_call> with JSON inside -> hermes (templates whose <tool_call> holds XML,
// <function=...> or <arg_key>, are another format: none); <|python_tag|>, or a Llama-3 header
// with a "parameters" calling convention -> llama3_json; otherwise none.
ToolCallFormat DetectToolCallFormat(std::string_view chat_template);

}  // namespace tarmac::grammar
