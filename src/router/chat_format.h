// ChatFormatter: turns chat messages into prompt text for one model, through the model's chat
// template (GGUF key tokenizer.chat_template) or, for a model without one, the plain default:
//
//   SYSTEM TEXT\n\n            (system/developer messages, each followed by a blank line)
//   User: TEXT\n               (user and tool messages)
//   Assistant: TEXT\n          (assistant messages)
//   Assistant:                 (when add_generation_prompt; no trailing space)
//
// Special tokens: text in the messages and tools (a user who writes "<|eot_id|>") is never
// encoded as a control token, while the template's own literals are: Encode renders with
// every special-token text in those strings swapped for a placeholder, puts the text back,
// and encodes with special tokens recognised only outside it (tok::EncodeOptions::
// literal_ranges). The plain default format parses no special text at all.
//
// Immutable after Create; Render and Encode are thread-safe.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "chat_template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tarmac::router {

class ChatFormatter {
 public:
  // template_source empty: the plain default. Errors: the template does not parse.
  static Result<ChatFormatter> Create(const std::string& template_source, std::string bos_token,
                                      std::string eos_token);
  bool has_template() const { return tmpl_.has_value(); }

  // messages: validated (content flattened to strings). tools: null or an array.
  Result<std::string> Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             bool add_generation_prompt) const;
  // The prompt's token ids (Render, then encode as above). Errors: the template's, or a
  // special-token text that the template transformed beyond recognition (the field named).
  Result<std::vector<int32_t>> Encode(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                      bool add_generation_prompt, const tok::Tokenizer& tokenizer) const;

 private:
  std::optional<chat_template::ChatTemplate> tmpl_;
  std::string bos_, eos_;
};

}  // namespace tarmac::router
