#include "router/chat_format.h"

namespace tarmac::router {

Result<ChatFormatter> ChatFormatter::Create(const std::string& source, std::string bos, std::string eos) {
  ChatFormatter f;
  f.bos_ = std::move(bos);
  f.eos_ = std::move(eos);
  if (!source.empty()) {
    TARMAC_ASSIGN_OR_RETURN(chat_template::ChatTemplate t, chat_template::ChatTemplate::Parse(source));
    f.tmpl_ = std::move(t);
  }
  return f;
}

Result<std::string> ChatFormatter::Render(const nlohmann::ordered_json& messages,
                                          const nlohmann::ordered_json& tools,
                                          bool add_generation_prompt) const {
  if (tmpl_) {
    nlohmann::ordered_json vars;
    vars["messages"] = messages;
    if (!tools.is_null()) vars["tools"] = tools;
    vars["add_generation_prompt"] = add_generation_prompt;
    vars["bos_token"] = bos_;
    vars["eos_token"] = eos_;
    return tmpl_->Render(vars);
  }
  std::string out;
  for (const auto& m : messages) {
    const std::string& role = m["role"].get_ref<const std::string&>();
    const std::string& content = m["content"].get_ref<const std::string&>();
    if (role == "system" || role == "developer") {
      out += content + "\n\n";
    } else if (role == "assistant") {
      out += "Assistant: " + content + "\n";
    } else {
      out += "User: " + content + "\n";
    }
  }
  if (add_generation_prompt) out += "Assistant:";
  return out;
}

}  // namespace tarmac::router
