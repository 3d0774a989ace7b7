#include "grammar/tool_call_format.h"

namespace tarmac::grammar {
namespace {

bool Has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

}  // namespace

const char* ToolCallFormatName(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3Json: return "llama3_json";
    case ToolCallFormat::kMistral: return "mistral";
  }
  return "none";
}

Result<ToolCallFormat> ParseToolCallFormat(std::string_view name) {
  for (ToolCallFormat f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json,
                           ToolCallFormat::kMistral})
    if (name == ToolCallFormatName(f)) return f;
  return InvalidArgument("tool call format '{}' is unknown (hermes, llama3_json, mistral, none)", name);
}

ToolCallFormat DetectToolCallFormat(std::string_view t) {
  if (Has(t, "[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (Has(t, "<tool_call>")) {
    if (Has(t, "<function=") || Has(t, "<arg_key>")) return ToolCallFormat::kNone;
    return ToolCallFormat::kHermes;
  }
  if (Has(t, "<|python_tag|>")) return ToolCallFormat::kLlama3Json;
  if (Has(t, "<|start_header_id|>") && Has(t, "\"parameters\"")) return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kNone;
}

}  // namespace tarmac::grammar
