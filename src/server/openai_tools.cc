#include "server/openai_tools.h"

#include <cctype>
#include <set>
#include <string>

#include "grammar/tool_call_grammar.h"

namespace tarmac::server {
namespace {

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

std::optional<ApiError> ParseTool(const Json& t, const std::string& p, grammar::ToolSpec* out, bool* strict) {
  if (!t.is_object()) return WrongType(p, "an object", t);
  if (auto e = CheckKnown(t, {"type", "function"}, p + ".")) return e;
  auto type = t.find("type");
  if (type == t.end() || *type != "function")
    return BadRequest(p + ".type", "'" + p + ".type' must be 'function'", "invalid_value");
  auto f = t.find("function");
  if (f == t.end() || !f->is_object())
    return BadRequest(p + ".function", "'" + p + ".function' is required and must be an object", "missing_required_parameter");
  if (auto e = CheckKnown(*f, {"name", "description", "parameters", "strict"}, p + ".function.")) return e;
  std::string name;
  if (auto e = GetString(*f, "name", &name)) return BadRequest(p + ".function.name", e->message, e->code);
  if (!ValidName(name))
    return BadRequest(p + ".function.name", "'" + p + ".function.name' must be 1 to 64 letters, digits, '_' or '-'", "invalid_value");
  if (auto d = f->find("description"); d != f->end() && !d->is_null() && !d->is_string())
    return WrongType(p + ".function.description", "a string", *d);
  if (auto s = f->find("strict"); s != f->end() && !s->is_null() && !s->is_boolean())
    return WrongType(p + ".function.strict", "a boolean", *s);
  *strict = f->value("strict", Json(false)) == true;
  out->name = name;
  if (auto params = f->find("parameters"); params != f->end() && !params->is_null()) {
    if (!params->is_object()) return WrongType(p + ".function.parameters", "an object (a JSON Schema)", *params);
    out->parameters = *params;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseToolChoice(const Json& c, const router::ToolUse& use, router::ToolUse* out) {
  if (c.is_string()) {
    const std::string& s = c.get_ref<const std::string&>();
    if (s == "none") out->choice = router::ToolChoice::kNone;
    else if (s == "auto") out->choice = router::ToolChoice::kAuto;
    else if (s == "required") out->choice = router::ToolChoice::kRequired;
    else return BadRequest("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or a function, got '" + s + "'", "invalid_value");
    return std::nullopt;
  }
  if (!c.is_object()) return WrongType("tool_choice", "a string or an object", c);
  if (c.empty()) return BadRequest("tool_choice", "'tool_choice' must not be an empty object", "invalid_value");
  if (auto e = CheckKnown(c, {"type", "function"}, "tool_choice.")) return e;
  if (c.value("type", Json()) != "function")
    return BadRequest("tool_choice.type", "'tool_choice.type' must be 'function'", "invalid_value");
  auto f = c.find("function");
  if (f == c.end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string())
    return BadRequest("tool_choice.function.name", "'tool_choice.function.name' is required and must be a string",
                      "missing_required_parameter");
  if (auto e = CheckKnown(*f, {"name"}, "tool_choice.function.")) return e;
  const std::string name = (*f)["name"].get<std::string>();
  bool known = false;
  for (const grammar::ToolSpec& t : use.tools) known = known || t.name == name;
  if (!known)
    return BadRequest("tool_choice.function.name", "'tool_choice' names function '" + name + "', which is not in 'tools'",
                      "invalid_value");
  out->choice = router::ToolChoice::kFunction;
  out->function = name;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseToolUse(const Json& j, int32_t max_whitespace, router::ToolUse* out, Json* template_tools) {
  *out = router::ToolUse{};
  out->json.max_whitespace = max_whitespace;
  *template_tools = nullptr;
  auto tools = j.find("tools");
  const bool has_tools = tools != j.end() && !tools->is_null();
  int64_t first_strict = -1;  // the first tool with strict: true
  if (has_tools) {
    if (!tools->is_array()) return WrongType("tools", "an array", *tools);
    if (tools->empty()) return BadRequest("tools", "'tools' must not be empty (leave it out instead)", "invalid_value");
    if (tools->size() > static_cast<size_t>(kMaxTools))
      return BadRequest("tools", "'tools' holds more than " + std::to_string(kMaxTools) + " tools", "invalid_value");
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      grammar::ToolSpec t;
      bool strict = false;
      if (auto e = ParseTool((*tools)[i], "tools[" + std::to_string(i) + "]", &t, &strict)) return e;
      if (strict && first_strict < 0) first_strict = static_cast<int64_t>(i);
      if (!names.insert(t.name).second)
        return BadRequest("tools", "'tools' names function '" + t.name + "' twice", "invalid_value");
      out->tools.push_back(std::move(t));
    }
    // Every parameter schema must compile (the message names tools[i].function.parameters).
    grammar::ForcedToolCallOptions o;
    o.json = out->json;
    auto g = grammar::ForcedToolCallGrammar(grammar::ToolCallFormat::kHermes, out->tools, o);
    if (!g.ok()) return BadRequest("tools", g.status().message(), "invalid_value");
    *template_tools = *tools;
    out->choice = router::ToolChoice::kAuto;
  }
  if (auto c = j.find("tool_choice"); c != j.end() && !c->is_null()) {
    const bool none = c->is_string() && *c == "none";
    if (!has_tools && !none)
      return BadRequest("tool_choice", "'tool_choice' is only allowed when 'tools' are specified", "invalid_value");
    if (auto e = ParseToolChoice(*c, *out, out)) return e;
  }
  if (auto p = j.find("parallel_tool_calls"); p != j.end() && !p->is_null()) {
    if (!p->is_boolean()) return WrongType("parallel_tool_calls", "a boolean", *p);
    if (!has_tools)
      return BadRequest("parallel_tool_calls", "'parallel_tool_calls' is only allowed when 'tools' are specified", "invalid_value");
    out->parallel = p->get<bool>();
  }
  // strict: true promises arguments that follow the schema. The grammar enforces that only when
  // the output is forced to be calls ('required' or a named function); under 'auto' the model
  // writes free text and calls unconstrained, so strict would be accepted and not honoured.
  if (first_strict >= 0 && out->choice == router::ToolChoice::kAuto) {
    const std::string p = "tools[" + std::to_string(first_strict) + "].function.strict";
    return BadRequest(p, "'" + p + "': true is enforced only with 'tool_choice' 'required' or a named function "
                         "(under 'auto' the arguments are not constrained); send strict false or a forcing tool_choice",
                      "unsupported_parameter");
  }
  return std::nullopt;
}

}  // namespace tarmac::server
