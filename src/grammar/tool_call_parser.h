// Tool calls out of a model's generated text, for the formats of tool_call_format.h, as
// OpenAI's API returns them: content plus a list of {id, name, arguments} (arguments: the
// JSON text the model wrote for them, passed through; a string value is decoded).
//
// ToolCallStreamParser is incremental: Feed it text as it is generated and it returns
// content to stream and tool-call deltas as OpenAI streams them (a call's first delta
// carries its index, id and name with empty arguments; later ones argument fragments). Text
// that may be the start of a marker ("<tool_c") is held back until it is decided. A call whose
// name cannot be read (not JSON, no "name") is given back as content; once a call has
// started, a malformed rest is dropped. ParseToolCalls is the same parser fed the whole text,
// so streamed deltas concatenate to exactly the non-streamed result.
//
// A parser holds one output's state: not thread-safe, one per output (choice).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/tool_call_format.h"

namespace tarmac::grammar {

struct ToolCallDelta {
  int32_t index = 0;
  std::string id;         // first delta of a call only
  std::string name;       // first delta of a call only
  std::string arguments;  // a fragment of the arguments text
};

struct ToolCallEvents {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct ParsedToolCalls {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

struct ToolCallParserOptions {
  // The output was generated under ForcedToolCallGrammar (tool_call_grammar.h): it holds only
  // calls and lacks the marker a grammar cannot spell (Mistral's [TOOL_CALLS] is a control
  // token).
  bool forced = false;
  // Id of the call with this index; default "call_<index>". Servers pass request-unique ids.
  std::function<std::string(int32_t index)> make_id;
};

class ToolCallStreamParser {
 public:
  explicit ToolCallStreamParser(ToolCallFormat format, ToolCallParserOptions options = {});
  ~ToolCallStreamParser();
  ToolCallStreamParser(ToolCallStreamParser&&) noexcept;
  ToolCallStreamParser& operator=(ToolCallStreamParser&&) noexcept;

  ToolCallEvents Feed(std::string_view text);
  // The output ended: releases what was held back. Preconditions: called once, last.
  ToolCallEvents Finish();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

ParsedToolCalls ParseToolCalls(std::string_view text, ToolCallFormat format, const ToolCallParserOptions& options = {});

// Adds streamed events to a result (what a client does with the deltas).
void AccumulateToolCallEvents(const ToolCallEvents& events, ParsedToolCalls* out);

}  // namespace tarmac::grammar
