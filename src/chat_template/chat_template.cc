// ChatTemplate: Status-returning wrapper over lexer, parser and interpreter.
#include "chat_template/chat_template.h"

#include "chat_template/lexer.h"
#include "chat_template/parser.h"

namespace tarmac::chat_template {

struct ChatTemplate::Impl {
  Body body;
};

std::string FormatTemplateError(const TemplateError& e) {
  if (!e.has_location()) return std::string("chat template: ") + e.what();
  return "chat template line " + std::to_string(e.line()) + ", column " + std::to_string(e.column()) +
         ": " + e.what();
}

Result<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  try {
    auto impl = std::make_shared<Impl>();
    impl->body = chat_template::Parse(Lex(source));
    ChatTemplate t;
    t.impl_ = std::move(impl);
    return t;
  } catch (const TemplateError& e) {
    return InvalidArgument("{}", FormatTemplateError(e));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("chat template: out of memory while parsing");
  }
}

Result<std::string> ChatTemplate::Render(const nlohmann::ordered_json& variables,
                                         const RenderOptions& options) const {
  if (!impl_) return InvalidArgument("chat template: not parsed");
  if (!variables.is_object()) return InvalidArgument("chat template: variables must be a JSON object");
  try {
    Dict globals;
    for (auto it = variables.begin(); it != variables.end(); ++it) {
      globals.Set(it.key(), Value::FromJson(it.value()));
    }
    Interpreter in(options.limits, options.now);
    return in.Render(impl_->body, globals);
  } catch (const TemplateError& e) {
    return InvalidArgument("{}", FormatTemplateError(e));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("chat template: out of memory while rendering");
  }
}

}  // namespace tarmac::chat_template
