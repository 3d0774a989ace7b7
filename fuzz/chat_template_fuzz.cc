// libFuzzer target for the chat-template lexer, parser and interpreter. The input is template
// source; it is parsed and, when it parses, rendered against a fixed conversation (system, user,
// assistant with a tool call, tool result; tools; content parts). Any input must either fail with
// an InvalidArgument/ResourceExhausted status or render; nothing may crash, hang (the step limit
// stops runaway loops and recursion), or leak. Run: scripts/fuzz-template.sh SECONDS
// (make fuzz-template FUZZ_SECONDS=N).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat_template/chat_template.h"

namespace {

const nlohmann::ordered_json& Variables() {
  static const nlohmann::ordered_json v = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 2, "x": 0.5, "ok": true, "none": null}}}]},
      {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "{\"t\": 21}"},
      {"role": "assistant", "content": "21°C ✓"}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["a", "b"]}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
  })");
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tarmac::StatusCode;
  using namespace tarmac::chat_template;
  std::string_view src(reinterpret_cast<const char*>(data), size);
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) {
    if (t.status().code() != StatusCode::kInvalidArgument && t.status().code() != StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "template fuzz: unexpected parse status %s\n", t.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  RenderOptions opts;
  opts.limits.max_steps = 200000;
  opts.limits.max_output_bytes = 1 << 20;
  opts.limits.max_depth = 300;
  std::tm now{};
  now.tm_year = 124;
  now.tm_mday = 1;
  opts.now = now;
  auto r = t->Render(Variables(), opts);
  if (!r.ok() && r.status().code() != StatusCode::kInvalidArgument && r.status().code() != StatusCode::kResourceExhausted) {
    std::fprintf(stderr, "template fuzz: unexpected render status %s\n", r.status().ToString().c_str());
    std::abort();
  }
  if (!r.ok() && r.status().message().rfind("chat template", 0) != 0) {
    std::fprintf(stderr, "template fuzz: error message without location prefix: %s\n", r.status().message().c_str());
    std::abort();
  }
  return 0;
}
