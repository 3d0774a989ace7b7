// ToolCallRender: one chat choice's tool calls as OpenAI returns them, out of the choice's
// generated text: the text goes through the model's tool-call parser (grammar/
// tool_call_parser.h); what is not a call stays content. Streamed, each call's first delta
// carries {index, id, type, function: {name, arguments}} and later ones argument fragments,
// one entry per call and chunk (fragments of one call within a chunk are merged); the
// non-streamed message's tool_calls are what those deltas add up to. Without
// parallel_tool_calls only the first call is kept.
//
// Owns the parser and the accumulated calls; not thread-safe (one per choice).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/tool_call_parser.h"
#include "router/generation_spec.h"

namespace tarmac::server {

class ToolCallRender {
 public:
  // id_prefix: unique per response (call ids are id_prefix + index).
  ToolCallRender(grammar::ToolCallFormat format, const router::ToolUse& use, const std::string& id_prefix);

  struct Delta {
    std::string content;
    nlohmann::ordered_json tool_calls;  // the delta's "tool_calls" array; null: none
  };
  // The next generated text of the choice; last: the choice ended (held-back text is released).
  Delta Feed(std::string_view text, bool last);

  bool any() const { return !parsed_.tool_calls.empty(); }
  // The message's "tool_calls": [{id, type: "function", function: {name, arguments}}].
  nlohmann::ordered_json MessageToolCalls() const;

 private:
  grammar::ToolCallStreamParser parser_;
  grammar::ParsedToolCalls parsed_;
  bool parallel_;
};

}  // namespace tarmac::server
