// The grammar that forces a tool call, for tool_choice "required" (one of the tools) or a
// named function, in a tool-call format (tool_call_format.h): the call's markers and JSON
// around each tool's parameter schema (compiled by json_schema.h), so the arguments validate.
//
//   hermes       <tool_call>\n{"name": "f", "arguments": ARGS}\n</tool_call>, parallel calls
//                one block after another, separated by "\n"
//   llama3_json  {"name": "f", "parameters": ARGS}, parallel ones separated by "; "
//   mistral      [{"name": "f", "arguments": ARGS}, ...] without the [TOOL_CALLS] marker
//                (a control token: parse the output with ToolCallParserOptions::forced)
//
// Pure function, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/tool_call_format.h"

namespace tarmac::grammar {

struct ToolSpec {
  std::string name;                   // tools[i].function.name
  nlohmann::ordered_json parameters;  // tools[i].function.parameters (null: any object)
};

struct ForcedToolCallOptions {
  std::optional<std::string> function;  // tool_choice {"type": "function", "function": {"name"}}
  bool parallel = true;                 // parallel_tool_calls: several calls allowed
  JsonSchemaOptions json;               // for the parameter schemas
};

// Errors: format none, no tools, a named function not among them, a parameter schema the
// compiler refuses (the message names "tools[i].function.parameters..." and the construct).
Result<Grammar> ForcedToolCallGrammar(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                      const ForcedToolCallOptions& options = {});

}  // namespace tarmac::grammar
