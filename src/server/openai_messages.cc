#include "server/openai_messages.h"

#include <set>
#include <string>

namespace tarmac::server {
namespace {

// Flattens content (a string, or text parts) into msg["content"]; null content is allowed only
// where `optional` says (an assistant message) and becomes "".
std::optional<ApiError> ParseContent(const Json& m, const std::string& param, bool optional, Json* msg) {
  auto content = m.find("content");
  if (content == m.end() || content->is_null()) {
    if (!optional) return BadRequest(param + ".content", "'" + param + ".content' is required", "missing_required_parameter");
    (*msg)["content"] = "";
    return std::nullopt;
  }
  if (content->is_string()) return std::nullopt;
  if (!content->is_array())
    return BadRequest(param + ".content", "'" + param + ".content' must be a string or an array of content parts, got " +
                                              TypeName(*content), "invalid_type");
  std::string text;
  for (size_t k = 0; k < content->size(); ++k) {
    const Json& part = (*content)[k];
    const std::string pp = param + ".content[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return BadRequest(pp, "'" + pp + "' must be an object with a 'type'", "invalid_type");
    if (part["type"] != "text")
      return BadRequest(pp + ".type", "content parts of type '" + part["type"].get<std::string>() +
                                          "' are not supported (text only)", "invalid_value");
    if (!part.contains("text") || !part["text"].is_string())
      return BadRequest(pp + ".text", "'" + pp + ".text' must be a string", "invalid_type");
    text += part["text"].get<std::string>();
  }
  (*msg)["content"] = text;
  return std::nullopt;
}

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}].
std::optional<ApiError> ParseToolCalls(const Json& calls, const std::string& param, Json* out) {
  if (!calls.is_array()) return WrongType(param, "an array", calls);
  *out = Json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string p = param + "[" + std::to_string(k) + "]";
    const Json& c = calls[k];
    if (!c.is_object()) return WrongType(p, "an object", c);
    if (auto e = CheckKnown(c, {"id", "type", "function"}, p + ".")) return e;
    auto id = c.find("id");
    if (id == c.end() || !id->is_string()) return BadRequest(p + ".id", "'" + p + ".id' is required and must be a string", "invalid_value");
    if (auto t = c.find("type"); t != c.end() && *t != "function")
      return BadRequest(p + ".type", "'" + p + ".type' must be 'function'", "invalid_value");
    auto f = c.find("function");
    if (f == c.end() || !f->is_object())
      return BadRequest(p + ".function", "'" + p + ".function' is required and must be an object", "invalid_value");
    if (auto e = CheckKnown(*f, {"name", "arguments"}, p + ".function.")) return e;
    auto name = f->find("name");
    if (name == f->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return BadRequest(p + ".function.name", "'" + p + ".function.name' is required and must be a non-empty string", "invalid_value");
    Json args = Json::object();
    if (auto a = f->find("arguments"); a != f->end() && !a->is_null()) {
      if (!a->is_string()) return WrongType(p + ".function.arguments", "a string (JSON text)", *a);
      try {
        args = Json::parse(a->get_ref<const std::string&>());
      } catch (const nlohmann::json::exception&) {
        return BadRequest(p + ".function.arguments", "'" + p + ".function.arguments' must be JSON text", "invalid_value");
      }
    }
    out->push_back(Json{{"id", *id}, {"type", "function"}, {"function", Json{{"name", *name}, {"arguments", std::move(args)}}}});
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseMessages(const Json& j, Json* out) {
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return BadRequest("messages", "'messages' is required", "missing_required_parameter");
  if (!it->is_array()) return WrongType("messages", "an array", *it);
  if (it->empty()) return BadRequest("messages", "'messages' must not be empty", "invalid_value");
  if (it->size() > static_cast<size_t>(kMaxMessages))
    return BadRequest("messages", "'messages' holds more than " + std::to_string(kMaxMessages) + " messages", "invalid_value");
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool", "function"};
  *out = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return BadRequest(param, "'" + param + "' must be an object", "invalid_type");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return BadRequest(param + ".role", "'" + param + ".role' is required and must be a string", "invalid_value");
    const std::string& r = role->get_ref<const std::string&>();
    if (!kRoles.count(r))
      return BadRequest(param + ".role", "'" + param + ".role' must be one of system, developer, user, assistant, tool; got '" +
                                             r + "'", "invalid_value");
    Json msg = m;
    if (auto e = ParseContent(m, param, r == "assistant", &msg)) return e;
    if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
      if (r != "assistant")
        return BadRequest(param + ".tool_calls", "'" + param + ".tool_calls' is allowed on assistant messages only", "invalid_value");
      if (auto e = ParseToolCalls(*calls, param + ".tool_calls", &msg["tool_calls"])) return e;
    }
    if (auto id = m.find("tool_call_id"); id != m.end() && !id->is_null() && !id->is_string())
      return WrongType(param + ".tool_call_id", "a string", *id);
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

}  // namespace tarmac::server
