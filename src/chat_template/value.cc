// Value: Python semantics for str(), repr(), ==, <, truthiness and json.dumps.
#include "chat_template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/utf8.h"

namespace tarmac::chat_template {

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::String(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  v.markup_ = markup;
  return v;
}
static uint16_t DepthOf(const ValueList& items) {
  int d = 0;
  for (const Value& i : items) d = std::max(d, i.depth());
  if (d + 1 > kMaxValueDepth) throw TemplateError("value nested too deeply (over " + std::to_string(kMaxValueDepth) + " levels)");
  return static_cast<uint16_t>(d + 1);
}
Value Value::List(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.depth_ = DepthOf(items);
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}
Value Value::Tuple(ValueList items) {
  Value v;
  v.kind_ = Kind::kTuple;
  v.depth_ = DepthOf(items);
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}
Value Value::MakeDict(std::shared_ptr<const Dict> d) {
  Value v;
  v.kind_ = Kind::kDict;
  int depth = 0;
  for (const auto& kv : d->items) depth = std::max(depth, kv.second.depth());
  if (depth + 1 > kMaxValueDepth) throw TemplateError("value nested too deeply (over " + std::to_string(kMaxValueDepth) + " levels)");
  v.depth_ = static_cast<uint16_t>(depth + 1);
  v.dict_ = std::move(d);
  return v;
}

const void* Value::identity() const {
  if (list_) return list_.get();
  if (dict_) return dict_.get();
  if (ns_) return ns_.get();
  if (fn_) return fn_.get();
  return nullptr;
}
Value Value::MakeNamespace(std::shared_ptr<Namespace> ns) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ns_ = std::move(ns);
  return v;
}
Value Value::MakeCallable(std::shared_ptr<const Callable> c) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::move(c);
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return None();
    case nlohmann::ordered_json::value_t::boolean: return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Float(static_cast<double>(u));
      return Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      d->items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d->Set(it.key(), FromJson(it.value()));
      return MakeDict(std::move(d));
    }
    default: throw TemplateError("unsupported JSON value (binary data)");
  }
}

double Value::AsDouble() const {
  switch (kind_) {
    case Kind::kBool: return b_ ? 1.0 : 0.0;
    case Kind::kInt: return static_cast<double>(i_);
    default: return f_;
  }
}

const ValueList& Value::AsList() const { return *list_; }

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0.0;
    case Kind::kString: return !s_.empty();
    case Kind::kList:
    case Kind::kTuple: return !list_->empty();
    case Kind::kDict: return dict_->size() != 0;
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return markup_ ? "Markup" : "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return "function";
  }
  return "object";
}

void Value::AppendStr(std::string* out, bool repr, int level) const {
  if (level > kMaxValueDepth) throw TemplateError("value nested too deeply to print");
  if (out->size() > static_cast<size_t>(kMaxBuiltSize)) throw TemplateError("printed value too large");
  auto dict_repr = [&](const Dict& d) {
    *out += '{';
    bool first = true;
    for (const auto& [k, v] : d.items) {
      if (!first) *out += ", ";
      first = false;
      *out += StringRepr(k);
      *out += ": ";
      v.AppendStr(out, true, level + 1);
    }
    *out += '}';
  };
  switch (kind_) {
    case Kind::kUndefined: *out += repr ? "Undefined" : ""; return;
    case Kind::kNone: *out += "None"; return;
    case Kind::kBool: *out += b_ ? "True" : "False"; return;
    case Kind::kInt: *out += std::to_string(i_); return;
    case Kind::kFloat: *out += FloatRepr(f_); return;
    case Kind::kString:
      if (!repr) *out += s_;
      else if (markup_) *out += "Markup(" + StringRepr(s_) + ")";
      else *out += StringRepr(s_);
      return;
    case Kind::kList:
    case Kind::kTuple: {
      *out += kind_ == Kind::kList ? '[' : '(';
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) *out += ", ";
        (*list_)[i].AppendStr(out, true, level + 1);
      }
      if (kind_ == Kind::kTuple && list_->size() == 1) *out += ',';
      *out += kind_ == Kind::kList ? ']' : ')';
      return;
    }
    case Kind::kDict: dict_repr(*dict_); return;
    case Kind::kNamespace:
      *out += "<Namespace ";
      dict_repr(ns_->attrs);
      *out += '>';
      return;
    case Kind::kCallable: *out += "<function " + fn_->name + ">"; return;
  }
}

std::string Value::Str() const {
  if (kind_ == Kind::kString) return s_;
  std::string out;
  AppendStr(&out, false, 0);
  return out;
}

std::string Value::Repr() const {
  std::string out;
  AppendStr(&out, true, 0);
  return out;
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& kv : items) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value v) {
  for (auto& kv : items) {
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

bool Equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() == b.AsDouble();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  if (a.identity() && a.identity() == b.identity()) return true;  // Python: identity implies ==
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.AsString() == b.AsString();
    case K::kList:
    case K::kTuple: {
      const ValueList& x = a.AsList();
      const ValueList& y = b.AsList();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case K::kDict: {
      const Dict& x = a.AsDict();
      const Dict& y = b.AsDict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* o = y.Find(k);
        if (!o || !Equals(v, *o)) return false;
      }
      return true;
    }
    case K::kNamespace: return &a.AsNamespace() == &b.AsNamespace();
    case K::kCallable: return &a.AsCallable() == &b.AsCallable();
    default: return false;
  }
}

bool LessThan(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() < b.AsDouble();
    return a.AsInt() < b.AsInt();
  }
  if (a.is_string() && b.is_string()) return a.AsString() < b.AsString();
  if (a.kind() == b.kind() && a.is_sequence_like()) {
    const ValueList& x = a.AsList();
    const ValueList& y = b.AsList();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return LessThan(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw TemplateError(std::string("'<' not supported between instances of '") + a.TypeName() +
                      "' and '" + b.TypeName() + "'");
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+17"
  bool neg = false;
  size_t p = 0;
  if (sci[0] == '-') {
    neg = true;
    p = 1;
  }
  size_t epos = sci.find('e');
  std::string digits;
  for (size_t i = p; i < epos; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  int exp = std::atoi(sci.c_str() + epos + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (ip.size() < static_cast<size_t>(exp + 1)) ip += '0';
      std::string fp = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
      out += ip + "." + fp;
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
      // Appended in two steps: GCC 12 misreads "." + a temporary string as an overlapping copy
      // (-Wrestrict, a false positive in its own headers).
      out += '.';
      out.append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

static bool IsPyPrintable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f)) return false;
  if ((cp >= 0x205f && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x206f) || cp == 0x3000) return false;
  if ((cp >= 0xd800 && cp <= 0xf8ff) || cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb)) return false;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61c || cp == 0x6dd || cp == 0x70f || cp == 0x180e) return false;
  if (cp >= 0xe0000 || cp == 0xfffe || cp == 0xffff) return false;
  return true;
}

static void AppendHex(std::string* out, const char* prefix, uint32_t v, int width) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%0*x", prefix, width, v);
  *out += buf;
}

std::string StringRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t cp = DecodeUtf8(s, &pos);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x80 && cp >= 0x20 && cp != 0x7f) {
      out += static_cast<char>(cp);
    } else if (!IsPyPrintable(cp)) {
      if (cp < 0x100) AppendHex(&out, "\\x", cp, 2);
      else if (cp < 0x10000) AppendHex(&out, "\\u", cp, 4);
      else AppendHex(&out, "\\U", cp, 8);
    } else {
      AppendUtf8(cp, &out);
    }
  }
  out += quote;
  return out;
}

static void JsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  *out += '"';
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t cp = DecodeUtf8(s, &pos);
    switch (cp) {
      case '"': *out += "\\\""; continue;
      case '\\': *out += "\\\\"; continue;
      case '\n': *out += "\\n"; continue;
      case '\r': *out += "\\r"; continue;
      case '\t': *out += "\\t"; continue;
      case '\b': *out += "\\b"; continue;
      case '\f': *out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7f)) {
      if (cp >= 0x10000) {
        uint32_t v = cp - 0x10000;
        AppendHex(out, "\\u", 0xd800 + (v >> 10), 4);
        AppendHex(out, "\\u", 0xdc00 + (v & 0x3ff), 4);
      } else {
        AppendHex(out, "\\u", cp, 4);
      }
    } else {
      AppendUtf8(cp, out);
    }
  }
  *out += '"';
}

static void JsonDumpsImpl(const Value& v, const JsonDumpOptions& o, int level, int depth,
                          std::string* out) {
  if (depth > kMaxValueDepth) throw TemplateError("tojson: value nested too deeply");
  if (out->size() > static_cast<size_t>(kMaxBuiltSize)) throw TemplateError("tojson: result too large");
  const bool pretty = o.indent >= 0 || !o.indent_str.empty();
  const std::string item_sep = o.has_separators ? o.item_sep : (pretty ? "," : ", ");
  const std::string key_sep = o.has_separators ? o.key_sep : ": ";
  auto newline = [&](int lvl) {
    *out += '\n';
    for (int i = 0; i < lvl; ++i) {
      if (!o.indent_str.empty()) *out += o.indent_str;
      else out->append(static_cast<size_t>(o.indent), ' ');
    }
  };
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return;
    case Value::Kind::kBool: *out += v.AsBool() ? "true" : "false"; return;
    case Value::Kind::kInt: *out += std::to_string(v.AsInt()); return;
    case Value::Kind::kFloat: {
      double d = v.AsDouble();
      if (std::isnan(d)) *out += "NaN";
      else if (std::isinf(d)) *out += d > 0 ? "Infinity" : "-Infinity";
      else *out += FloatRepr(d);
      return;
    }
    case Value::Kind::kString: JsonString(v.AsString(), o.ensure_ascii, out); return;
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const ValueList& items = v.AsList();
      if (items.empty()) {
        *out += "[]";
        return;
      }
      *out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += item_sep;
        if (pretty) newline(level + 1);
        JsonDumpsImpl(items[i], o, level + 1, depth + 1, out);
      }
      if (pretty) newline(level);
      *out += ']';
      return;
    }
    case Value::Kind::kDict: {
      const Dict& d = v.AsDict();
      if (d.size() == 0) {
        *out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& kv : d.items) entries.push_back(&kv);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      *out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) *out += item_sep;
        if (pretty) newline(level + 1);
        JsonString(entries[i]->first, o.ensure_ascii, out);
        *out += key_sep;
        JsonDumpsImpl(entries[i]->second, o, level + 1, depth + 1, out);
      }
      if (pretty) newline(level);
      *out += '}';
      return;
    }
    default:
      throw TemplateError(std::string("Object of type ") + v.TypeName() +
                          " is not JSON serializable");
  }
}

std::string JsonDumps(const Value& v, const JsonDumpOptions& opts) {
  std::string out;
  JsonDumpsImpl(v, opts, 0, 0, &out);
  return out;
}

std::vector<uint32_t> ToCodepoints(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) cps.push_back(DecodeUtf8(s, &pos));
  return cps;
}

std::string FromCodepoints(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end && i < cps.size(); ++i) AppendUtf8(cps[i], &out);
  return out;
}

size_t CodepointLength(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool IsPyWhitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace tarmac::chat_template
