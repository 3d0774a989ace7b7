#include "server/openai_structured.h"

#include <cctype>
#include <string>

#include "grammar/structured_output.h"

namespace tarmac::server {
namespace {

std::optional<ApiError> Built(Result<grammar::Grammar> g, const std::string& param,
                              std::shared_ptr<const grammar::Grammar>* out) {
  if (!g.ok()) return BadRequest(param, g.status().message(), "invalid_value");
  *out = std::make_shared<const grammar::Grammar>(std::move(g).value());
  return std::nullopt;
}

std::optional<ApiError> ParseJsonSchemaFormat(const Json& rf, grammar::JsonSchemaOptions o,
                                              std::shared_ptr<const grammar::Grammar>* out) {
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object())
    return BadRequest("response_format.json_schema", "'response_format.json_schema' is required and must be an object",
                      "missing_required_parameter");
  if (auto e = CheckKnown(*js, {"name", "description", "schema", "strict"}, "response_format.json_schema.")) return e;
  auto name = js->find("name");
  if (name == js->end() || !name->is_string() || name->get_ref<const std::string&>().empty() ||
      name->get_ref<const std::string&>().size() > 64)
    return BadRequest("response_format.json_schema.name",
                      "'response_format.json_schema.name' is required: 1 to 64 letters, digits, '_' or '-'", "invalid_value");
  for (char c : name->get_ref<const std::string&>())
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
      return BadRequest("response_format.json_schema.name",
                        "'response_format.json_schema.name' may hold only letters, digits, '_' and '-'", "invalid_value");
  if (auto d = js->find("description"); d != js->end() && !d->is_null() && !d->is_string())
    return WrongType("response_format.json_schema.description", "a string", *d);
  if (auto s = js->find("strict"); s != js->end() && !s->is_null() && !s->is_boolean())
    return WrongType("response_format.json_schema.strict", "a boolean", *s);
  o.path = "response_format.json_schema.schema";
  auto schema = js->find("schema");
  if (schema == js->end() || schema->is_null()) return Built(grammar::JsonObjectGrammar(o), o.path, out);
  if (!schema->is_object() && !schema->is_boolean()) return WrongType(o.path, "an object (a JSON Schema)", *schema);
  return Built(grammar::GrammarFromJsonSchema(*schema, o), o.path, out);
}

std::optional<ApiError> ParseResponseFormat(const Json& rf, const grammar::JsonSchemaOptions& o,
                                            std::shared_ptr<const grammar::Grammar>* out) {
  if (!rf.is_object()) return WrongType("response_format", "an object", rf);
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string())
    return BadRequest("response_format.type", "'response_format.type' is required and must be a string", "missing_required_parameter");
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "text" || t == "json_object") {
    if (auto e = CheckKnown(rf, {"type"}, "response_format.")) return e;
    if (t == "json_object") *out = std::make_shared<const grammar::Grammar>(grammar::JsonObjectGrammar(o));
    return std::nullopt;
  }
  if (t == "json_schema") {
    if (auto e = CheckKnown(rf, {"type", "json_schema"}, "response_format.")) return e;
    return ParseJsonSchemaFormat(rf, o, out);
  }
  return BadRequest("response_format.type", "'response_format.type' must be 'text', 'json_object' or 'json_schema', got '" + t + "'",
                    "invalid_value");
}

std::optional<ApiError> ParseStructuredOutputs(const Json& so, const grammar::JsonSchemaOptions& o,
                                               std::shared_ptr<const grammar::Grammar>* out) {
  if (!so.is_object()) return WrongType("structured_outputs", "an object", so);
  if (auto e = CheckKnown(so, {"json", "regex", "choice", "grammar", "json_object"}, "structured_outputs.")) return e;
  std::string key;
  for (auto it = so.begin(); it != so.end(); ++it) {
    if (it->is_null() || (it.key() == "json_object" && *it == false)) continue;
    if (!key.empty())
      return BadRequest("structured_outputs", "'structured_outputs' takes one of json, regex, choice, grammar, json_object; got " +
                                                  key + " and " + it.key(), "invalid_value");
    key = it.key();
  }
  if (key.empty()) return std::nullopt;
  const std::string param = "structured_outputs." + key;
  const Json& v = so[key];
  grammar::StructuredOutputSpec spec;
  spec.json = o;
  spec.json.path = param;
  if (key == "json_object") {
    if (!v.is_boolean()) return WrongType(param, "a boolean", v);
    spec.kind = grammar::StructuredOutputKind::kJsonObject;
  } else if (key == "json") {
    if (v.is_string()) return Built(grammar::GrammarFromJsonSchemaText(v.get_ref<const std::string&>(), spec.json), param, out);
    if (!v.is_object() && !v.is_boolean()) return WrongType(param, "a JSON Schema (an object or its text)", v);
    return Built(grammar::GrammarFromJsonSchema(v, spec.json), param, out);
  } else if (key == "choice") {
    if (!v.is_array()) return WrongType(param, "an array of strings", v);
    spec.kind = grammar::StructuredOutputKind::kChoice;
    for (const Json& c : v) {
      if (!c.is_string()) return BadRequest(param, "'" + param + "' must hold strings, got " + TypeName(c), "invalid_type");
      spec.choices.push_back(c.get<std::string>());
    }
  } else {
    if (!v.is_string()) return WrongType(param, "a string", v);
    spec.kind = key == "regex" ? grammar::StructuredOutputKind::kRegex : grammar::StructuredOutputKind::kGbnf;
    spec.text = v.get<std::string>();
  }
  return Built(grammar::BuildGrammar(spec), param, out);
}

}  // namespace

std::optional<ApiError> ParseStructuredOutput(const Json& j, int32_t max_whitespace,
                                              std::shared_ptr<const grammar::Grammar>* out) {
  out->reset();
  grammar::JsonSchemaOptions o;
  o.max_whitespace = max_whitespace;
  if (auto rf = j.find("response_format"); rf != j.end() && !rf->is_null())
    if (auto e = ParseResponseFormat(*rf, o, out)) return e;
  if (auto so = j.find("structured_outputs"); so != j.end() && !so->is_null()) {
    std::shared_ptr<const grammar::Grammar> g;
    if (auto e = ParseStructuredOutputs(*so, o, &g)) return e;
    if (g && *out)
      return BadRequest("structured_outputs", "give 'response_format' or 'structured_outputs', not both", "invalid_value");
    if (g) *out = std::move(g);
  }
  return std::nullopt;
}

}  // namespace tarmac::server
