#include "router/chat_format.h"

#include <fmt/format.h>

namespace tarmac::router {
namespace {

using Json = nlohmann::ordered_json;

// Placeholders stand for special-token text inside the request's strings while the template
// renders: U+10FFFD (private use, untouched by trim/upper/lower), the index, U+10FFFD.
constexpr std::string_view kMark = "\xF4\x8F\xBF\xBD";

struct Substitution {
  std::vector<std::string> originals;  // placeholder k stands for originals[k]
};

// Replaces every special-token text in s (longest first, as the tokenizer matches).
void Substitute(std::string* s, const tok::Tokenizer& t, Substitution* sub) {
  std::string out;
  size_t i = 0, start = 0;
  while (i < s->size()) {
    int32_t hit = -1;
    for (int32_t id : t.special_ids()) {
      const std::string& text = t.vocab().tokens[id];
      if (!text.empty() && s->compare(i, text.size(), text) == 0) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    const std::string& text = t.vocab().tokens[hit];
    out.append(*s, start, i - start);
    out += fmt::format("{}{}{}", kMark, sub->originals.size(), kMark);
    sub->originals.push_back(text);
    i += text.size();
    start = i;
  }
  if (sub->originals.empty() && start == 0) return;
  out.append(*s, start);
  *s = std::move(out);
}

void SubstituteAll(Json* j, const tok::Tokenizer& t, Substitution* sub) {
  if (j->is_string()) {
    Substitute(&j->get_ref<std::string&>(), t, sub);
  } else if (j->is_array() || j->is_object()) {
    for (auto& v : *j) SubstituteAll(&v, t, sub);
  }
}

// Puts the originals back into the rendered text; their ranges are literal. False when a
// placeholder did not survive the template intact.
bool Restore(std::string* text, const Substitution& sub, std::vector<std::pair<size_t, size_t>>* ranges) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t at = text->find(kMark, pos);
    if (at == std::string::npos) break;
    const size_t digits = at + kMark.size();
    size_t end = digits;
    while (end < text->size() && (*text)[end] >= '0' && (*text)[end] <= '9') ++end;
    if (end == digits || text->compare(end, kMark.size(), kMark) != 0) return false;
    const size_t k = std::stoul(text->substr(digits, end - digits));
    if (k >= sub.originals.size()) return false;
    out.append(*text, pos, at - pos);
    ranges->emplace_back(out.size(), out.size() + sub.originals[k].size());
    out += sub.originals[k];
    pos = end + kMark.size();
  }
  out.append(*text, pos);
  *text = std::move(out);
  return true;
}

}  // namespace

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

Result<std::vector<int32_t>> ChatFormatter::Encode(const Json& messages, const Json& tools, bool add_generation_prompt,
                                                   const tok::Tokenizer& tokenizer) const {
  if (!tmpl_) {  // the plain format has no special text of its own: none is parsed
    TARMAC_ASSIGN_OR_RETURN(std::string text, Render(messages, tools, add_generation_prompt));
    return tokenizer.Encode(text, tok::EncodeOptions{true, false});
  }
  Substitution sub;
  Json m = messages, t = tools;
  SubstituteAll(&m, tokenizer, &sub);
  SubstituteAll(&t, tokenizer, &sub);
  TARMAC_ASSIGN_OR_RETURN(std::string text, Render(m, t, add_generation_prompt));
  std::vector<std::pair<size_t, size_t>> ranges;
  if (!Restore(&text, sub, &ranges))
    return InvalidField("messages", "the chat template transformed a message's special-token text ({}) beyond "
                                    "recognition; remove it from the message", sub.originals[0]);
  tok::EncodeOptions opts{false, true};  // the template writes its special tokens (BOS) as text
  opts.literal_ranges = &ranges;
  return tokenizer.Encode(text, opts);
}

}  // namespace tarmac::router
