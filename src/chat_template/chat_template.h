// ChatTemplate: the public face of the module. Parses the Jinja source of a model's chat
// template (GGUF key tokenizer.chat_template) once and renders prompts from JSON variables
// exactly as Hugging Face transformers does with Python's Jinja2 (trim_blocks, lstrip_blocks,
// immutable sandbox, loop controls, {% generation %}, tojson without ASCII escaping,
// raise_exception, strftime_now).
//
// A ChatTemplate is immutable after Parse() and cheap to copy (shared AST); Render() may be
// called from several threads at once. Errors never throw: they come back as Status
// (InvalidArgument) whose message names the line and column, e.g.
//   "chat template line 3, column 12: unexpected 'endfor' tag (no open block it could close)".
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "chat_template/interpreter.h"

namespace tarmac::chat_template {

struct RenderOptions {
  RenderLimits limits;
  // The local date and time strftime_now() reports; nullopt uses the system clock. Tests fix it
  // for reproducible output. Fields as in std::tm (tm_year = years since 1900, tm_mon 0-11).
  std::optional<std::tm> now;
};

class ChatTemplate {
 public:
  // Parses template source. Fails (InvalidArgument) on syntax errors and unsupported
  // constructs, naming line and column.
  static Result<ChatTemplate> Parse(std::string_view source);

  // Renders with `variables` (a JSON object; each key becomes a template variable, e.g.
  // messages, tools, add_generation_prompt, bos_token). Use nlohmann::ordered_json so that dict
  // key order (visible through tojson and iteration) is the input's, as in Python.
  Result<std::string> Render(const nlohmann::ordered_json& variables, const RenderOptions& options = {}) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// "line L, column C: msg" for a TemplateError (shared by Parse/Render and tools).
std::string FormatTemplateError(const TemplateError& e);

}  // namespace tarmac::chat_template
