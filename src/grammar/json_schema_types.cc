// One compiler per JSON type: objects, arrays, strings, numbers (json_schema_compiler.h).

#include <cmath>
#include <map>

#include "base/utf8.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/number_ranges.h"
#include "grammar/regex_parser.h"

namespace tarmac::grammar {
namespace {

// Bounds above this make automata too large to precompute in reasonable time.
constexpr int64_t kMaxCount = 10000;
// Inline object layouts up to this many property slots; larger ones chain rules (below).
constexpr size_t kInlineObjectSlots = 4096;
// Longest property name (the additional-name automaton recurses over its characters).
constexpr size_t kMaxNameBytes = 1024;

Result<std::optional<int32_t>> ReadCount(const Json& s, const char* key, const std::string& path) {
  if (!s.contains(key)) return std::optional<int32_t>();
  const Json& v = s[key];
  const bool integral = v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
  if (!integral || v.get<double>() < 0) return InvalidArgument("{}.{}: must be a non-negative integer", path, key);
  if (v.get<double>() > kMaxCount)
    return Unimplemented("{}.{}: {} is above the largest supported bound ({})", path, key, v.dump(), kMaxCount);
  return std::optional<int32_t>(static_cast<int32_t>(v.get<int64_t>()));
}

// A JSON string spelling a property name that is none of `names`, without escapes (so that
// its text is its value and one comparison suffices): a trie of the names, where leaving the
// trie or stopping off a name's end is allowed.
Expr AdditionalKey(const std::vector<std::string>& names) {
  struct Node {
    std::map<uint32_t, int> children;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : names) {
    int at = 0;
    size_t pos = 0;
    bool representable = true;
    std::vector<uint32_t> cps;
    while (pos < name.size()) {
      const uint32_t cp = DecodeUtf8(name, &pos);
      if (cp < 0x20 || cp == '"' || cp == '\\') representable = false;
      cps.push_back(cp);
    }
    if (!representable) continue;  // an escape-free key can never equal it
    for (uint32_t cp : cps) {
      auto it = trie[at].children.find(cp);
      if (it == trie[at].children.end()) {
        trie.push_back(Node{});
        it = trie[at].children.emplace(cp, static_cast<int>(trie.size()) - 1).first;
      }
      at = it->second;
    }
    trie[at].terminal = true;
  }
  const std::vector<CodepointRange> key_char = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, kMaxCodepoint}};
  const Expr free_rest = Sequence({Star(CharClass(key_char)), Literal("\"")});
  auto build = [&](auto&& self, int at) -> Expr {
    std::vector<Expr> alts;
    if (!trie[at].terminal) alts.push_back(Literal("\""));
    std::vector<CodepointRange> others = key_char;
    std::vector<CodepointRange> taken;
    for (const auto& [cp, child] : trie[at].children) {
      std::string s;
      AppendUtf8(cp, &s);
      alts.push_back(Sequence({Literal(s), self(self, child)}));
      taken.push_back({cp, cp});
    }
    // key_char minus the children: complement of (complement(key_char) + taken).
    std::vector<CodepointRange> excluded = CharClass(key_char, true).ranges;
    excluded.insert(excluded.end(), taken.begin(), taken.end());
    Expr rest = CharClass(excluded, true);
    if (!rest.ranges.empty()) alts.push_back(Sequence({std::move(rest), free_rest}));
    return Choice(std::move(alts));
  };
  return Sequence({Literal("\""), build(build, 0)});
}

}  // namespace

Result<Expr> SchemaCompiler::CompileObject(const Json& s, const std::string& path) {
  const bool has_props = s.contains("properties");
  const bool has_required = s.contains("required");
  const bool has_additional = s.contains("additionalProperties");
  if (has_props && !s["properties"].is_object()) return InvalidArgument("{}.properties: must be an object", path);
  std::vector<std::string> required;
  if (has_required) {
    const Json& r = s["required"];
    if (!r.is_array()) return InvalidArgument("{}.required: must be an array of strings", path);
    for (const Json& name : r) {
      if (!name.is_string()) return InvalidArgument("{}.required: must be an array of strings", path);
      if (name.get<std::string>().size() > kMaxNameBytes)
        return Unimplemented("{}.required: names longer than {} bytes are not supported", path, kMaxNameBytes);
      if (std::find(required.begin(), required.end(), name.get<std::string>()) == required.end())
        required.push_back(name.get<std::string>());
    }
  }
  auto is_required = [&](const std::string& n) { return std::find(required.begin(), required.end(), n) != required.end(); };

  // Values of properties nobody lists.
  std::optional<Expr> extra;
  const std::string apath = ChildPath(path, "additionalProperties");
  if (has_additional) {
    const Json& ap = s["additionalProperties"];
    if (ap.is_boolean()) {
      if (ap.get<bool>()) extra = values_.AnyValue();
    } else if (ap.is_object()) {
      TARMAC_ASSIGN_OR_RETURN(Expr e, Compile(ap, apath));
      extra = std::move(e);
    } else {
      return InvalidArgument("{}: must be a boolean or a schema", apath);
    }
  } else if ((!has_props && !has_required) || opts_.additional_properties_default) {
    extra = values_.AnyValue();
  }

  std::vector<Member> members;
  std::vector<std::string> names;
  const Expr ws = Ws();
  auto add = [&](const std::string& name, Expr value, bool req) {
    members.push_back({Sequence({JsonLiteral(Json(name)), ws, Literal(":"), ws, std::move(value)}), req});
    names.push_back(name);
  };
  if (has_props) {
    for (const auto& [name, ps] : s["properties"].items()) {
      const std::string ppath = ChildPath(ChildPath(path, "properties"), name);
      if (name.size() > kMaxNameBytes)
        return Unimplemented("{}.properties: names longer than {} bytes are not supported", path, kMaxNameBytes);
      if (ps.is_boolean() && !ps.get<bool>()) {
        if (is_required(name)) return InvalidArgument("{}: the property is required but its schema is 'false'", ppath);
        names.push_back(name);  // never present; still not an additional name
        continue;
      }
      TARMAC_ASSIGN_OR_RETURN(Expr value, Compile(ps, ppath));
      add(name, std::move(value), is_required(name));
    }
  }
  for (const std::string& name : required) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    // Required but not listed: its value follows additionalProperties.
    if (has_additional && !extra)
      return InvalidArgument("{}.required: '{}' is required but neither listed in 'properties' nor allowed by "
                             "'additionalProperties'",
                             path, name);
    add(name, extra ? *extra : values_.AnyValue(), true);
  }
  std::optional<Expr> extra_kv;
  if (extra) extra_kv = Sequence({AdditionalKey(names), ws, Literal(":"), ws, std::move(*extra)});
  return ObjectOf(std::move(members), std::move(extra_kv), path);
}

// Members in order, each optional unless required, separated by commas; additional ones
// after them. The first member present has no comma before it, so the layout is: a choice
// of which member comes first (only optional ones may be skipped), then the rest. The rest
// after member j is shared by every choice that reaches j; past kInlineObjectSlots it is a
// chain of rules instead of copies.
Expr SchemaCompiler::ObjectOf(std::vector<Member> members, std::optional<Expr> extra, const std::string& path) {
  const Expr ws = Ws(), sep = Sep();
  const size_t n = members.size();
  size_t first_required = n;
  for (size_t i = 0; i < n; ++i) {
    if (members[i].required) {
      first_required = i;
      break;
    }
  }
  const size_t branches = std::min(first_required + 1, n);
  const bool chain = branches * n > kInlineObjectSlots;
  const Expr tail = extra ? Star(Sequence({sep, *extra})) : Empty();
  // rest[j]: the members from j on, each preceded by a comma.
  std::vector<Expr> rest(n + 1);
  rest[n] = tail;
  for (size_t j = n; j-- > 1;) {
    Expr piece = Sequence({sep, members[j].kv});
    Expr body = Sequence({members[j].required ? std::move(piece) : Optional(std::move(piece)), rest[j + 1]});
    if (chain) {
      const int32_t rule = g_->AddRule(RuleName(path + "-rest-" + std::to_string(j)));
      g_->SetBody(rule, std::move(body));
      rest[j] = RuleRef(rule);
    } else {
      rest[j] = std::move(body);
    }
  }
  std::vector<Expr> firsts;
  for (size_t j = 0; j < branches; ++j) firsts.push_back(Sequence({members[j].kv, rest[j + 1]}));
  const bool can_be_empty = first_required == n;
  if (can_be_empty && extra) firsts.push_back(Sequence({*extra, tail}));
  if (firsts.empty()) return Sequence({Literal("{"), ws, Literal("}")});
  Expr body = Sequence({Choice(std::move(firsts)), ws});
  return Sequence({Literal("{"), ws, can_be_empty ? Optional(std::move(body)) : std::move(body), Literal("}")});
}

Result<Expr> SchemaCompiler::CompileArray(const Json& s, const std::string& path) {
  std::vector<Json> prefix;
  std::optional<Json> rest_schema;
  std::string prefix_key = "prefixItems", rest_path = ChildPath(path, "items");
  if (s.contains("items") && s["items"].is_array()) {
    prefix_key = "items";  // draft 4-2019 tuple form
    prefix.assign(s["items"].begin(), s["items"].end());
    if (s.contains("additionalItems")) rest_schema = s["additionalItems"];
    rest_path = ChildPath(path, "additionalItems");
  } else if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) return InvalidArgument("{}.prefixItems: must be an array", path);
    prefix.assign(s["prefixItems"].begin(), s["prefixItems"].end());
    if (s.contains("items")) rest_schema = s["items"];
  } else {
    rest_schema = s.contains("items") ? s["items"] : Json(true);
  }
  if (s.contains("uniqueItems") && s["uniqueItems"] == true) return Unimplemented("{}: 'uniqueItems' is not supported", path);
  if (rest_schema && rest_schema->is_boolean() && !rest_schema->get<bool>()) rest_schema.reset();
  TARMAC_ASSIGN_OR_RETURN(std::optional<int32_t> min_items, ReadCount(s, "minItems", path));
  TARMAC_ASSIGN_OR_RETURN(std::optional<int32_t> max_items, ReadCount(s, "maxItems", path));
  const int32_t k = static_cast<int32_t>(prefix.size());
  const int32_t min = min_items.value_or(0);
  int32_t max = max_items.value_or(Expr::kUnbounded);
  if (!rest_schema) max = max == Expr::kUnbounded ? k : std::min(max, k);
  if (max != Expr::kUnbounded && min > max)
    return InvalidArgument("{}: minItems {} is more than the {} items the schema allows", path, min, max);

  std::vector<Expr> items;
  for (int32_t i = 0; i < k; ++i) {
    TARMAC_ASSIGN_OR_RETURN(Expr e, Compile(prefix[i], IndexPath(path, prefix_key, i)));
    items.push_back(std::move(e));
  }
  std::optional<Expr> rest;
  if (rest_schema) {
    TARMAC_ASSIGN_OR_RETURN(Expr e, Compile(*rest_schema, rest_path));
    rest = std::move(e);
  }
  const Expr ws = Ws(), sep = Sep();
  if (max == 0) return Sequence({Literal("["), ws, Literal("]")});
  // tail: the items after the first, each preceded by a comma; item i is required while i < min.
  auto count_from = [&](int32_t i) { return max == Expr::kUnbounded ? Expr::kUnbounded : std::max(0, max - i); };
  Expr tail = rest ? Repeat(Sequence({sep, *rest}), std::max(0, min - std::max(k, 1)), count_from(std::max(k, 1)))
                   : Empty();
  for (int32_t i = k - 1; i >= 1; --i) {
    if (max != Expr::kUnbounded && i >= max) continue;
    Expr piece = Sequence({sep, items[i], std::move(tail)});
    tail = i < min ? std::move(piece) : Optional(std::move(piece));
  }
  Expr elements = Sequence({k > 0 ? items[0] : *rest, std::move(tail)});
  Expr body = Sequence({std::move(elements), ws});
  return Sequence({Literal("["), ws, min == 0 ? Optional(std::move(body)) : std::move(body), Literal("]")});
}

Result<Expr> SchemaCompiler::CompileString(const Json& s, const std::string& path) {
  TARMAC_ASSIGN_OR_RETURN(std::optional<int32_t> min_len, ReadCount(s, "minLength", path));
  TARMAC_ASSIGN_OR_RETURN(std::optional<int32_t> max_len, ReadCount(s, "maxLength", path));
  const bool bounded = min_len || max_len;
  if (min_len && max_len && *min_len > *max_len)
    return InvalidArgument("{}: minLength {} is more than maxLength {}", path, *min_len, *max_len);
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return InvalidArgument("{}.pattern: must be a string", path);
    if (bounded || s.contains("format"))
      return Unimplemented("{}: 'pattern' together with '{}' is not supported", path,
                           s.contains("format") ? "format" : (min_len ? "minLength" : "maxLength"));
    auto re = ParseRegex(s["pattern"].get<std::string>());
    if (!re.ok()) return Status(re.status().code(), fmt::format("{}.pattern: {}", path, re.status().message()));
    // JSON Schema patterns search: unanchored ends match anything.
    Expr text = std::move(re->expr);
    if (!re->anchored_start) text = Sequence({Star(AnyChar()), std::move(text)});
    if (!re->anchored_end) text = Sequence({std::move(text), Star(AnyChar())});
    return Sequence({Literal("\""), JsonEscaped(text), Literal("\"")});
  }
  if (s.contains("format")) {
    if (!s["format"].is_string()) return InvalidArgument("{}.format: must be a string", path);
    if (bounded)
      return Unimplemented("{}: 'format' together with '{}' is not supported", path, min_len ? "minLength" : "maxLength");
    auto f = JsonStringFormat(s["format"].get<std::string>());
    if (!f.ok()) return Status(f.status().code(), fmt::format("{}.format: {}", path, f.status().message()));
    return Sequence({Literal("\""), JsonEscaped(*f), Literal("\"")});
  }
  return JsonString(min_len.value_or(0), max_len.value_or(Expr::kUnbounded));
}

Result<Expr> SchemaCompiler::CompileNumber(const Json& s, const std::string& path, bool integer) {
  // Each bound as (value, exclusive); draft 4 spells exclusivity as a boolean beside the bound.
  struct Bound {
    double value;
    bool exclusive;
  };
  std::optional<Bound> lo, hi;
  auto read = [&](const char* key, const char* excl_key, bool lower, std::optional<Bound>* out) -> Status {
    auto tighter = [&](Bound b) {
      if (!*out || (lower ? b.value > (*out)->value : b.value < (*out)->value) ||
          (b.value == (*out)->value && b.exclusive))
        *out = b;
    };
    if (s.contains(key)) {
      if (!s[key].is_number()) return InvalidArgument("{}.{}: must be a number", path, key);
      const bool draft4 = s.contains(excl_key) && s[excl_key].is_boolean() && s[excl_key].get<bool>();
      tighter({s[key].get<double>(), draft4});
    }
    if (s.contains(excl_key) && !s[excl_key].is_boolean()) {
      if (!s[excl_key].is_number()) return InvalidArgument("{}.{}: must be a number", path, excl_key);
      tighter({s[excl_key].get<double>(), true});
    }
    if (*out && (!std::isfinite((*out)->value) || std::fabs((*out)->value) > 9e18))
      return Unimplemented("{}.{}: bounds beyond +-9e18 are not supported", path, key);
    return Status::Ok();
  };
  TARMAC_RETURN_IF_ERROR(read("minimum", "exclusiveMinimum", true, &lo));
  TARMAC_RETURN_IF_ERROR(read("maximum", "exclusiveMaximum", false, &hi));
  if (!lo && !hi) return integer ? JsonInteger() : JsonNumber();
  std::optional<Expr> e;
  if (integer) {
    std::optional<int64_t> ilo, ihi;
    if (lo) ilo = static_cast<int64_t>(lo->exclusive ? std::floor(lo->value) + 1 : std::ceil(lo->value));
    if (hi) ihi = static_cast<int64_t>(hi->exclusive ? std::ceil(hi->value) - 1 : std::floor(hi->value));
    e = IntegerInRange(ilo, ihi);
  } else {
    for (const auto& [b, key] : {std::pair{lo, "minimum"}, std::pair{hi, "maximum"}}) {
      if (b && b->value != std::floor(b->value))
        return Unimplemented("{}: a {} of {} on a number is not supported (only integer bounds)", path, key, b->value);
    }
    std::optional<NumberBound> nlo, nhi;
    if (lo) nlo = NumberBound{static_cast<int64_t>(lo->value), lo->exclusive};
    if (hi) nhi = NumberBound{static_cast<int64_t>(hi->value), hi->exclusive};
    e = NumberInRange(nlo, nhi);
  }
  if (!e) return InvalidArgument("{}: no {} satisfies the minimum and maximum", path, integer ? "integer" : "number");
  return std::move(*e);
}

}  // namespace tarmac::grammar
