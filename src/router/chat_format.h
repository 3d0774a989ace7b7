// ChatFormatter: turns chat messages into prompt text for one model, through the model's chat
// template (GGUF key tokenizer.chat_template) or, for a model without one, the plain default:
//
//   SYSTEM TEXT\n\n            (system/developer messages, each followed by a blank line)
//   User: TEXT\n               (user and tool messages)
//   Assistant: TEXT\n          (assistant messages)
//   Assistant:                 (when add_generation_prompt; no trailing space)
//
// Immutable after Create; Render is thread-safe.
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
  // How to encode the rendered text: a template writes its special tokens (BOS) as text.
  tok::EncodeOptions encode_options() const {
    return has_template() ? tok::EncodeOptions{false, true} : tok::EncodeOptions{true, false};
  }

 private:
  std::optional<chat_template::ChatTemplate> tmpl_;
  std::string bos_, eos_;
};

}  // namespace tarmac::router
