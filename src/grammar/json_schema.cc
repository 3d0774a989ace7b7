#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "grammar/json_schema_compiler.h"

namespace tarmac::grammar {
namespace {

constexpr int kMaxDepth = 128;

// Keywords JSON Schema defines that this compiler does not implement.
const std::set<std::string>& Unsupported() {
  static const std::set<std::string> k = {
      "not", "if", "then", "else", "patternProperties", "propertyNames", "minProperties", "maxProperties",
      "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems",
      "contains", "minContains", "maxContains", "multipleOf", "$dynamicRef", "$recursiveRef", "contentSchema"};
  return k;
}

const std::set<std::string>& KnownTypes() {
  static const std::set<std::string> k = {"null", "boolean", "object", "array", "number", "integer", "string"};
  return k;
}

std::string JsonTypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    default: return "unknown";
  }
}

bool ValueHasType(const Json& v, const std::string& type) {
  const std::string t = JsonTypeName(v);
  if (t == type) return true;
  if (type == "number") return t == "integer";
  if (type == "integer" && t == "number") {
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

// "/$defs/a~1b" -> "schema.$defs.a/b" for messages.
std::string PointerPath(const std::string& base, const std::string& pointer) {
  std::string out = base, token;
  bool open = false;
  auto flush = [&] {
    if (open) out = ChildPath(out, token);
    token.clear();
  };
  for (size_t i = 0; i < pointer.size(); ++i) {
    const char c = pointer[i];
    if (c == '/') {
      flush();
      open = true;
    } else if (c == '~' && i + 1 < pointer.size() && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
      token.push_back(pointer[++i] == '0' ? '~' : '/');
    } else {
      token.push_back(c);
    }
  }
  flush();
  return out;
}

std::vector<std::string> TypeList(const Json& t) {
  if (t.is_string()) return {t.get<std::string>()};
  std::vector<std::string> out;
  for (const Json& x : t) out.push_back(x.get<std::string>());
  return out;
}

}  // namespace

bool IsAnnotation(const std::string& k) {
  static const std::set<std::string> a = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "$anchor",
                                          "$dynamicAnchor", "$vocabulary", "contentEncoding", "contentMediaType"};
  return a.count(k) > 0;
}

bool IsConstraint(const std::string& k) {
  static const std::set<std::string> c = {
      "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "required", "additionalProperties",
      "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength",
      "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  return c.count(k) > 0;
}

std::string ChildPath(const std::string& path, const std::string& key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '-';
  });
  return plain ? path + "." + key : path + "[" + Json(key).dump() + "]";
}

std::string IndexPath(const std::string& path, const std::string& key, size_t index) {
  return fmt::format("{}[{}]", ChildPath(path, key), index);
}

Result<Expr> SchemaCompiler::Compile(const Json& s, const std::string& path) {
  if (depth_ >= kMaxDepth) return InvalidArgument("{}: schema nested deeper than {} levels", path, kMaxDepth);
  ++depth_;
  struct Leave {
    int* d;
    ~Leave() { --*d; }
  } leave{&depth_};

  if (s.is_boolean()) {
    if (s.get<bool>()) return values_.AnyValue();
    return InvalidArgument("{}: the schema 'false' allows no value", path);
  }
  if (!s.is_object()) return InvalidArgument("{}: a schema must be an object or a boolean, got {}", path, JsonTypeName(s));
  for (const auto& [k, v] : s.items()) {
    if (Unsupported().count(k)) return Unimplemented("{}: '{}' is not supported", path, k);
  }
  if (s.contains("$ref")) return CompileRef(s, path);
  if (s.contains("allOf")) return CompileAllOf(s, path);
  if (s.contains("anyOf") || s.contains("oneOf")) return CompileAnyOf(s, path);
  if (s.contains("enum") || s.contains("const")) return CompileEnum(s, path);
  TARMAC_ASSIGN_OR_RETURN(std::vector<std::string> types, TypesOf(s, path));
  if (types.empty()) return values_.AnyValue();
  std::vector<Expr> alts;
  for (const std::string& t : types) {
    TARMAC_ASSIGN_OR_RETURN(Expr e, CompileType(s, t, path));
    alts.push_back(std::move(e));
  }
  return Choice(std::move(alts));
}

Result<Json> SchemaCompiler::Resolve(const Json& schema, const std::string& path) const {
  Json s = schema;
  for (int hops = 0; s.is_object() && s.contains("$ref"); ++hops) {
    for (const auto& [k, v] : s.items())
      if (k != "$ref" && IsConstraint(k)) return s;  // not a bare reference: merged as it is
    if (hops > 32) return InvalidArgument("{}: '$ref' chain longer than 32", path);
    const Json& ref = s["$ref"];
    if (!ref.is_string() || ref.get<std::string>().rfind('#', 0) != 0)
      return Unimplemented("{}.$ref: only local references ('#/...') are supported", path);
    const std::string pointer = ref.get<std::string>().substr(1);
    if (pointer.empty()) {
      s = root_;
      continue;
    }
    Json::json_pointer p;
    try {
      p = Json::json_pointer(pointer);
    } catch (const std::exception&) {
      return InvalidArgument("{}.$ref: '{}' is not a JSON pointer", path, ref.get<std::string>());
    }
    if (!root_.contains(p)) return InvalidArgument("{}.$ref: '{}' points to nothing", path, ref.get<std::string>());
    s = root_.at(p);
  }
  return s;
}

Result<Expr> SchemaCompiler::CompileRef(const Json& s, const std::string& path) {
  for (const auto& [k, v] : s.items())
    if (k != "$ref" && IsConstraint(k)) return Unimplemented("{}: '$ref' together with '{}' is not supported", path, k);
  const Json& ref = s["$ref"];
  if (!ref.is_string()) return InvalidArgument("{}.$ref: must be a string", path);
  const std::string text = ref.get<std::string>();
  if (text.rfind('#', 0) != 0)
    return Unimplemented("{}.$ref: only local references ('#/...') are supported, got '{}'", path, text);
  if (auto it = refs_.find(text); it != refs_.end()) return RuleRef(it->second);
  const std::string pointer = text.substr(1);
  const Json* target = &root_;
  if (!pointer.empty()) {
    Json::json_pointer p;
    try {
      p = Json::json_pointer(pointer);
    } catch (const std::exception&) {
      return InvalidArgument("{}.$ref: '{}' is not a JSON pointer", path, text);
    }
    if (!root_.contains(p)) return InvalidArgument("{}.$ref: '{}' points to nothing", path, text);
    target = &root_.at(p);
  }
  const int32_t rule = g_->AddRule(RuleName("ref" + pointer));
  refs_.emplace(text, rule);
  TARMAC_ASSIGN_OR_RETURN(Expr body, Compile(*target, PointerPath(opts_.path, pointer)));
  g_->SetBody(rule, std::move(body));
  return RuleRef(rule);
}

Status SchemaCompiler::MergeInto(Json* dst, const Json& src, const std::string& path) const {
  for (const auto& [k, v] : src.items()) {
    if (IsAnnotation(k) || k == "$defs" || k == "definitions") continue;
    if (k == "properties") {
      if (!v.is_object()) return InvalidArgument("{}.properties: must be an object", path);
      Json& props = (*dst)["properties"];
      if (props.is_null()) props = Json::object();
      for (const auto& [name, ps] : v.items()) {
        if (props.contains(name) && props[name] != ps)
          return Unimplemented("{}: branches give property '{}' different schemas; merging them is not supported", path,
                               name);
        props[name] = ps;
      }
    } else if (k == "required") {
      if (!v.is_array()) return InvalidArgument("{}.required: must be an array of strings", path);
      Json& req = (*dst)["required"];
      if (req.is_null()) req = Json::array();
      for (const Json& name : v)
        if (std::find(req.begin(), req.end(), name) == req.end()) req.push_back(name);
    } else if (k == "type" && dst->contains("type")) {
      if (!v.is_string() && !v.is_array()) return InvalidArgument("{}.type: must be a string or an array", path);
      std::vector<std::string> a = TypeList((*dst)["type"]), b = TypeList(v), both;
      for (const std::string& t : a) {
        const bool in_b = std::find(b.begin(), b.end(), t) != b.end() ||
                          (t == "integer" && std::find(b.begin(), b.end(), "number") != b.end());
        if (in_b) both.push_back(t);
        else if (t == "number" && std::find(b.begin(), b.end(), "integer") != b.end()) both.push_back("integer");
      }
      if (both.empty()) return InvalidArgument("{}: the branches' types have nothing in common", path);
      (*dst)["type"] = both;
    } else if (dst->contains(k)) {
      if ((*dst)[k] != v)
        return Unimplemented("{}: branches disagree on '{}'; only merging without conflicts is supported", path, k);
    } else {
      (*dst)[k] = v;
    }
  }
  return Status::Ok();
}

Result<Expr> SchemaCompiler::CompileAllOf(const Json& s, const std::string& path) {
  const Json& branches = s["allOf"];
  if (!branches.is_array() || branches.empty()) return InvalidArgument("{}.allOf: must be a non-empty array", path);
  Json merged = s;
  merged.erase("allOf");
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string bpath = IndexPath(path, "allOf", i);
    TARMAC_ASSIGN_OR_RETURN(Json b, Resolve(branches[i], bpath));
    if (b.is_boolean()) {
      if (!b.get<bool>()) return InvalidArgument("{}: the schema 'false' allows no value", bpath);
      continue;
    }
    if (!b.is_object()) return InvalidArgument("{}: a schema must be an object or a boolean", bpath);
    if (b.contains("allOf") || b.contains("anyOf") || b.contains("oneOf"))
      return Unimplemented("{}: combinators inside 'allOf' are not supported", bpath);
    TARMAC_RETURN_IF_ERROR(MergeInto(&merged, b, bpath));
  }
  return Compile(merged, path);
}

Result<Expr> SchemaCompiler::CompileAnyOf(const Json& s, const std::string& path) {
  if (s.contains("anyOf") && s.contains("oneOf"))
    return Unimplemented("{}: 'anyOf' and 'oneOf' together are not supported", path);
  const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";
  const Json& branches = s[key];
  if (!branches.is_array() || branches.empty()) return InvalidArgument("{}.{}: must be a non-empty array", path, key);
  // Constraints beside the combinator apply to every branch: merge them in.
  Json siblings = Json::object();
  for (const auto& [k, v] : s.items())
    if (k != key && IsConstraint(k)) siblings[k] = v;
  std::vector<Expr> alts;
  for (size_t i = 0; i < branches.size(); ++i) {
    const std::string bpath = IndexPath(path, key, i);
    if (branches[i].is_boolean() && !branches[i].get<bool>()) continue;
    if (siblings.empty()) {
      TARMAC_ASSIGN_OR_RETURN(Expr e, Compile(branches[i], bpath));
      alts.push_back(std::move(e));
      continue;
    }
    TARMAC_ASSIGN_OR_RETURN(Json b, Resolve(branches[i], bpath));
    Json merged = siblings;
    if (b.is_object()) TARMAC_RETURN_IF_ERROR(MergeInto(&merged, b, bpath));
    TARMAC_ASSIGN_OR_RETURN(Expr e, Compile(merged, bpath));
    alts.push_back(std::move(e));
  }
  if (alts.empty()) return InvalidArgument("{}.{}: every branch is 'false'", path, key);
  return Choice(std::move(alts));
}

Result<Expr> SchemaCompiler::CompileEnum(const Json& s, const std::string& path) {
  for (const auto& [k, v] : s.items())
    if (IsConstraint(k) && k != "enum" && k != "const" && k != "type")
      return Unimplemented("{}: '{}' together with '{}' is not supported", path, k, s.contains("enum") ? "enum" : "const");
  std::vector<Json> values;
  if (s.contains("enum")) {
    const Json& e = s["enum"];
    if (!e.is_array() || e.empty()) return InvalidArgument("{}.enum: must be a non-empty array", path);
    values.assign(e.begin(), e.end());
  }
  if (s.contains("const")) {
    if (values.empty()) {
      values.push_back(s["const"]);
    } else {
      std::erase_if(values, [&](const Json& v) { return v != s["const"]; });
    }
  }
  if (s.contains("type")) {
    TARMAC_ASSIGN_OR_RETURN(std::vector<std::string> types, TypesOf(s, path));
    std::erase_if(values, [&](const Json& v) {
      return std::none_of(types.begin(), types.end(), [&](const std::string& t) { return ValueHasType(v, t); });
    });
  }
  if (values.empty()) return InvalidArgument("{}: no value satisfies 'enum', 'const' and 'type' together", path);
  std::vector<Expr> alts;
  for (const Json& v : values) alts.push_back(JsonLiteral(v));
  return Choice(std::move(alts));
}

Result<std::vector<std::string>> SchemaCompiler::TypesOf(const Json& s, const std::string& path) const {
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (!t.is_string() && !(t.is_array() && !t.empty()))
      return InvalidArgument("{}.type: must be a type name or a non-empty array of them", path);
    for (const Json& x : t.is_array() ? t : Json::array({t})) {
      if (!x.is_string() || !KnownTypes().count(x.get<std::string>()))
        return InvalidArgument("{}.type: unknown type {}", path, x.dump());
      types.push_back(x.get<std::string>());
    }
  } else {
    // No type: the keywords present tell which types they constrain; any value otherwise.
    auto any = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
    };
    if (any({"properties", "required", "additionalProperties"})) types.push_back("object");
    if (any({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) types.push_back("array");
    if (any({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("number");
  }
  if (std::find(types.begin(), types.end(), "number") != types.end()) std::erase(types, std::string("integer"));
  return types;
}

Result<Expr> SchemaCompiler::CompileType(const Json& s, const std::string& type, const std::string& path) {
  if (type == "null") return Literal("null");
  if (type == "boolean") return Choice({Literal("true"), Literal("false")});
  if (type == "string") return CompileString(s, path);
  if (type == "integer") return CompileNumber(s, path, true);
  if (type == "number") return CompileNumber(s, path, false);
  if (type == "object") return CompileObject(s, path);
  return CompileArray(s, path);
}

Result<Expr> AddJsonSchema(const Json& schema, const JsonSchemaOptions& options, std::string_view rule_prefix,
                           Grammar* g) {
  SchemaCompiler c(schema, options, std::string(rule_prefix), g);
  return c.Compile(schema, options.path);
}

Result<Grammar> GrammarFromJsonSchema(const Json& schema, const JsonSchemaOptions& options) {
  Grammar g;
  const int32_t root = g.AddRule("root");
  TARMAC_ASSIGN_OR_RETURN(Expr body, AddJsonSchema(schema, options, "", &g));
  g.SetBody(root, std::move(body));
  g.SetRoot(root);
  return g;
}

Result<Grammar> GrammarFromJsonSchemaText(std::string_view schema_json, const JsonSchemaOptions& options) {
  Json schema = Json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return InvalidArgument("{}: not valid JSON", options.path);
  return GrammarFromJsonSchema(schema, options);
}

Grammar JsonObjectGrammar(const JsonSchemaOptions& options) {
  Grammar g;
  JsonValueRules values(&g, "json", options.max_whitespace);
  g.SetRoot(values.ObjectRule());
  return g;
}

}  // namespace tarmac::grammar
