// Filters and tests (see filters.h).
#include "chat_template/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat_template/builtins.h"
#include "chat_template/call_args.h"
#include "chat_template/interpreter.h"
#include "chat_template/ops.h"

namespace tarmac::chat_template {
namespace {

int64_t Len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(CodepointLength(v.AsString()));
    case Value::Kind::kList:
    case Value::Kind::kTuple: return static_cast<int64_t>(v.AsList().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.AsDict().size());
    default: throw TemplateError(std::string("object of type '") + v.TypeName() + "' has no len()");
  }
}

// soft_str: Markup stays Markup, anything else becomes str(x).
Value SoftStr(const Value& v) { return v.is_string() ? v : Value::String(v.Str()); }

// Key for sorting with case_sensitive=False (Jinja's ignore_case lowercases strings).
Value SortKey(Interpreter& in, const Value& v, bool case_sensitive, const Value& attribute) {
  Value k = attribute.is_string() ? in.GetPath(v, attribute.AsString())
            : (attribute.is_int() ? in.GetItem(v, attribute) : v);
  if (!case_sensitive && k.is_string()) return Value::String(PyLower(k.AsString()));
  return k;
}

void StableSort(Interpreter& in, std::vector<std::pair<Value, Value>>* keyed, bool reverse) {
  // Python's sort is stable and reverse=True keeps equal elements in original order.
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& a, const auto& b) {
    in.Step();
    return reverse ? LessThan(b.first, a.first) : LessThan(a.first, b.first);
  });
}

bool TestSelect(Interpreter& in, const Value& item, const std::string* test, ValueList& extra) {
  if (!test) return item.Truthy();
  KwArgs none;
  ValueList args = extra;
  return ApplyTest(in, *test, item, args, none);
}

Value SelectOrReject(Interpreter& in, const Value& v, ValueList& args, bool select, bool by_attr,
                     const std::string& fname) {
  ValueList out;
  size_t i = 0;
  Value attr;
  if (by_attr) {
    if (args.empty()) throw TemplateError(fname + "() missing required argument 'attribute'");
    attr = args[0];
    i = 1;
  }
  std::string test_name;
  bool has_test = i < args.size();
  if (has_test) {
    if (!args[i].is_string()) throw TemplateError(fname + "(): test name must be a string");
    test_name = args[i].AsString();
  }
  ValueList extra(args.begin() + std::min(args.size(), i + 1), args.end());
  for (const Value& item : Iterate(v)) {
    in.Step();
    Value probe = by_attr ? (attr.is_string() ? in.GetPath(item, attr.AsString()) : in.GetItem(item, attr)) : item;
    if (TestSelect(in, probe, has_test ? &test_name : nullptr, extra) == select) out.push_back(item);
  }
  return Value::List(std::move(out));
}

std::string Indent(const std::string& s0, const std::string& ind, bool first, bool blank) {
  std::string s = s0 + "\n";
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + ind;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t i = 1; i < lines.size(); ++i) {
        if (i > 1) rv += "\n";
        rv += lines[i].empty() ? lines[i] : ind + lines[i];
      }
    }
  }
  return first ? ind + rv : rv;
}

Value ToJson(const Value& v, ValueList& args, KwArgs& kwargs) {
  CallArgs a("tojson", args, kwargs, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = a.Get(0).Truthy();
  const Value& indent = a.Get(1);
  if (indent.is_int() || indent.is_bool()) o.indent = static_cast<int>(std::clamp<int64_t>(indent.AsInt(), 0, 64));
  else if (indent.is_string()) o.indent_str = indent.AsString(), o.indent = 0;
  else if (!indent.is_none() && !indent.is_undefined()) throw TemplateError("tojson: indent must be an int or str");
  const Value& seps = a.Get(2);
  if (seps.is_sequence_like()) {
    if (seps.AsList().size() != 2 || !seps.AsList()[0].is_string() || !seps.AsList()[1].is_string()) {
      throw TemplateError("tojson: separators must be a pair of strings");
    }
    o.has_separators = true;
    o.item_sep = seps.AsList()[0].AsString();
    o.key_sep = seps.AsList()[1].AsString();
  }
  o.sort_keys = a.Get(3).Truthy();
  return Value::String(JsonDumps(v, o));
}

Value ParseNumber(const Value& v, bool as_float, const Value& fallback) {
  if (v.is_int() || v.is_bool()) return as_float ? Value::Float(v.AsDouble()) : Value::Int(v.AsInt());
  if (v.is_float()) {
    if (as_float) return v;
    double d = v.AsDouble();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return fallback;
    return Value::Int(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.AsString(), Value(), true, true);
    std::string t;
    for (char c : s) {
      if (c != '_') t += c;
    }
    if (t.empty()) return fallback;
    char* end = nullptr;
    if (as_float) {
      double d = std::strtod(t.c_str(), &end);
      return *end == '\0' ? Value::Float(d) : fallback;
    }
    errno = 0;
    long long i = std::strtoll(t.c_str(), &end, 10);
    if (*end == '\0' && errno == 0) return Value::Int(i);
    double d = std::strtod(t.c_str(), &end);  // Jinja's int() falls back to int(float(s))
    if (*end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::Int(static_cast<int64_t>(d));
    return fallback;
  }
  return fallback;
}

}  // namespace

Value ApplyFilter(Interpreter& in, const std::string& name, const Value& v, ValueList& args, KwArgs& kwargs) {
  in.Step();
  const std::string& f = name;
  if (f == "trim") {
    CallArgs a(f, args, kwargs, {"chars"});
    Value s = SoftStr(v);
    return Value::String(PyStrip(s.AsString(), a.Get(0), true, true), s.is_markup());
  }
  if (f == "length" || f == "count") {
    CallArgs a(f, args, kwargs, {});
    return Value::Int(Len(v));
  }
  if (f == "tojson") return ToJson(v, args, kwargs);
  if (f == "upper" || f == "lower" || f == "title" || f == "capitalize") {
    CallArgs a(f, args, kwargs, {});
    Value s = SoftStr(v);
    const std::string& x = s.AsString();
    std::string r = f == "upper" ? PyUpper(x) : f == "lower" ? PyLower(x) : f == "title" ? PyTitle(x) : PyCapitalize(x);
    return Value::String(std::move(r), s.is_markup());
  }
  if (f == "default" || f == "d") {
    CallArgs a(f, args, kwargs, {"default_value", "boolean"});
    if (v.is_undefined() || (a.Get(1).Truthy() && !v.Truthy())) return a.GetOr(0, Value::String(""));
    return v;
  }
  if (f == "join") {
    CallArgs a(f, args, kwargs, {"d", "attribute"});
    std::string sep = a.Has(0) ? a.Get(0).Str() : "";
    std::string out;
    bool first = true;
    for (const Value& item : Iterate(v)) {
      in.Step();
      if (!first) out += sep;
      first = false;
      out += (a.Has(1) && !a.Get(1).is_none()) ? in.GetPath(item, a.Get(1).Str()).Str() : item.Str();
      if (out.size() > static_cast<size_t>(kMaxBuiltSize)) throw TemplateError("join() result too large");
    }
    return Value::String(std::move(out));
  }
  if (f == "replace") {
    CallArgs a(f, args, kwargs, {"old", "new", "count"});
    int64_t count = (a.Has(2) && !a.Get(2).is_none()) ? a.Get(2).AsInt() : -1;
    return Value::String(PyReplace(v.Str(), a.Required(0, f).Str(), a.Required(1, f).Str(), count));
  }
  if (f == "items") {
    CallArgs a(f, args, kwargs, {});
    if (v.is_undefined()) return Value::List({});
    if (!v.is_dict()) throw TemplateError("Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& [k, x] : v.AsDict().items) out.push_back(Value::Tuple({Value::String(k), x}));
    return Value::List(std::move(out));
  }
  if (f == "list") {
    CallArgs a(f, args, kwargs, {});
    return Value::List(Iterate(v));
  }
  if (f == "string") {
    CallArgs a(f, args, kwargs, {});
    return SoftStr(v);
  }
  if (f == "safe") {
    CallArgs a(f, args, kwargs, {});
    return Value::String(v.Str(), true);
  }
  if (f == "escape" || f == "e" || f == "forceescape") {
    CallArgs a(f, args, kwargs, {});
    if (v.is_markup() && f != "forceescape") return v;
    return Value::String(HtmlEscape(v.Str()), true);
  }
  if (f == "selectattr" || f == "rejectattr" || f == "select" || f == "reject") {
    if (!kwargs.empty()) throw TemplateError(f + "() takes no keyword arguments");
    bool by_attr = f == "selectattr" || f == "rejectattr";
    bool select = f == "selectattr" || f == "select";
    return SelectOrReject(in, v, args, select, by_attr, f);
  }
  if (f == "map") {
    ValueList out;
    const Value* attribute = nullptr;
    Value dflt;
    for (const auto& [k, x] : kwargs) {
      if (k == "attribute") attribute = &x;
      else if (k == "default") dflt = x;
    }
    if (attribute) {
      for (const Value& item : Iterate(v)) {
        in.Step();
        Value r = attribute->is_string() ? in.GetPath(item, attribute->AsString()) : in.GetItem(item, *attribute);
        out.push_back(r.is_undefined() && !dflt.is_undefined() ? dflt : r);
      }
      return Value::List(std::move(out));
    }
    if (args.empty() || !args[0].is_string()) throw TemplateError("map() needs a filter name or attribute=");
    std::string fname = args[0].AsString();
    ValueList rest(args.begin() + 1, args.end());
    for (const Value& item : Iterate(v)) {
      ValueList a2 = rest;
      KwArgs k2 = kwargs;
      out.push_back(ApplyFilter(in, fname, item, a2, k2));
    }
    return Value::List(std::move(out));
  }
  if (f == "dictsort") {
    CallArgs a(f, args, kwargs, {"case_sensitive", "by", "reverse"});
    if (!v.is_dict()) throw TemplateError("dictsort: value is not a mapping");
    bool cs = a.Get(0).Truthy();
    std::string by = a.Has(1) ? a.Get(1).Str() : "key";
    if (by != "key" && by != "value") throw TemplateError("You can only sort by either 'key' or 'value'");
    std::vector<std::pair<Value, Value>> keyed;
    for (const auto& [k, x] : v.AsDict().items) {
      Value key = by == "key" ? Value::String(k) : x;
      if (!cs && key.is_string()) key = Value::String(PyLower(key.AsString()));
      keyed.emplace_back(key, Value::Tuple({Value::String(k), x}));
    }
    StableSort(in, &keyed, a.Get(2).Truthy());
    ValueList out;
    for (auto& kv : keyed) out.push_back(std::move(kv.second));
    return Value::List(std::move(out));
  }
  if (f == "sort") {
    CallArgs a(f, args, kwargs, {"reverse", "case_sensitive", "attribute"});
    std::vector<std::pair<Value, Value>> keyed;
    for (const Value& item : Iterate(v)) keyed.emplace_back(SortKey(in, item, a.Get(1).Truthy(), a.Get(2)), item);
    StableSort(in, &keyed, a.Get(0).Truthy());
    ValueList out;
    for (auto& kv : keyed) out.push_back(std::move(kv.second));
    return Value::List(std::move(out));
  }
  if (f == "unique") {
    CallArgs a(f, args, kwargs, {"case_sensitive", "attribute"});
    ValueList out, seen;
    for (const Value& item : Iterate(v)) {
      Value key = SortKey(in, item, a.Get(0).Truthy(), a.Get(1));
      bool dup = false;
      for (const Value& s : seen) {
        in.Step();
        if (Equals(s, key)) dup = true;
      }
      if (!dup) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::List(std::move(out));
  }
  if (f == "min" || f == "max") {
    CallArgs a(f, args, kwargs, {"case_sensitive", "attribute"});
    ValueList items = Iterate(v);
    if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    Value best_key = SortKey(in, items[0], a.Get(0).Truthy(), a.Get(1));
    for (size_t i = 1; i < items.size(); ++i) {
      Value k = SortKey(in, items[i], a.Get(0).Truthy(), a.Get(1));
      if (f == "min" ? LessThan(k, best_key) : LessThan(best_key, k)) {
        best = i;
        best_key = k;
      }
    }
    return items[best];
  }
  if (f == "first" || f == "last") {
    CallArgs a(f, args, kwargs, {});
    ValueList items = Iterate(v);
    if (items.empty()) return Value::Undefined(std::string("No ") + f + " item, sequence was empty.");
    return f == "first" ? items.front() : items.back();
  }
  if (f == "reverse") {
    CallArgs a(f, args, kwargs, {});
    if (v.is_string()) return Slice(v, Value(), Value(), Value::Int(-1));
    ValueList items = Iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (f == "sum") {
    CallArgs a(f, args, kwargs, {"attribute", "start"});
    Value total = a.GetOr(1, Value::Int(0));
    for (const Value& item : Iterate(v)) {
      in.Step();
      total = BinaryOp("+", total, a.Has(0) ? in.GetPath(item, a.Get(0).Str()) : item);
    }
    return total;
  }
  if (f == "abs") {
    CallArgs a(f, args, kwargs, {});
    if (v.is_int() || v.is_bool()) {
      if (v.AsInt() == INT64_MIN) throw TemplateError("integer result out of range (64-bit)");
      return Value::Int(std::llabs(v.AsInt()));
    }
    if (v.is_float()) return Value::Float(std::fabs(v.AsDouble()));
    throw TemplateError(std::string("bad operand type for abs(): '") + v.TypeName() + "'");
  }
  if (f == "int") {
    CallArgs a(f, args, kwargs, {"default", "base"});
    return ParseNumber(v, false, a.GetOr(0, Value::Int(0)));
  }
  if (f == "float") {
    CallArgs a(f, args, kwargs, {"default"});
    return ParseNumber(v, true, a.GetOr(0, Value::Float(0.0)));
  }
  if (f == "round") {
    CallArgs a(f, args, kwargs, {"precision", "method"});
    int64_t prec = a.Has(0) ? a.Get(0).AsInt() : 0;
    std::string method = a.Has(1) ? a.Get(1).Str() : "common";
    if (!v.is_number()) throw TemplateError("round: value must be a number");
    double x = v.AsDouble(), scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(prec, -300, 300)));
    double r = method == "common" ? std::nearbyint(x * scale) / scale
               : method == "ceil"  ? std::ceil(x * scale) / scale
               : method == "floor" ? std::floor(x * scale) / scale
                                   : throw TemplateError("method must be common, ceil or floor");
    if ((v.is_int() || v.is_bool()) && method == "common") return Value::Int(static_cast<int64_t>(r));
    return Value::Float(r);
  }
  if (f == "indent") {
    CallArgs a(f, args, kwargs, {"width", "first", "blank"});
    std::string ind = a.Has(0) && a.Get(0).is_string()
                          ? a.Get(0).AsString()
                          : std::string(static_cast<size_t>(std::clamp<int64_t>(a.Has(0) ? a.Get(0).AsInt() : 4, 0, 256)), ' ');
    return Value::String(Indent(v.Str(), ind, a.Get(1).Truthy(), a.Get(2).Truthy()), v.is_markup());
  }
  if (f == "center") {
    CallArgs a(f, args, kwargs, {"width"});
    std::string s = v.Str();
    int64_t width = std::min<int64_t>(a.Has(0) ? a.Get(0).AsInt() : 80, 1 << 20);
    int64_t len = static_cast<int64_t>(CodepointLength(s));
    if (width <= len) return Value::String(s);
    int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
    return Value::String(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
  }
  if (f == "wordcount") {
    CallArgs a(f, args, kwargs, {});
    return Value::Int(static_cast<int64_t>(CallMethod(in, Value::String(v.Str()), "split", args, kwargs).AsList().size()));
  }
  if (f == "attr") {
    CallArgs a(f, args, kwargs, {"name"});
    return in.GetAttr(v, a.Required(0, f).Str());
  }
  throw TemplateError("no filter named '" + f + "' (unsupported)");
}

bool ApplyTest(Interpreter& in, const std::string& name, const Value& v, ValueList& args, KwArgs& kwargs) {
  in.Step();
  const std::string& t = name;
  auto arg = [&](const char* pname) -> Value {
    CallArgs a(t, args, kwargs, {pname});
    return a.Required(0, t);
  };
  auto noargs = [&]() { CallArgs a(t, args, kwargs, {}); };
  using K = Value::Kind;
  if (t == "defined") return noargs(), !v.is_undefined();
  if (t == "undefined") return noargs(), v.is_undefined();
  if (t == "none") return noargs(), v.is_none();
  if (t == "string") return noargs(), v.is_string();
  if (t == "mapping") return noargs(), v.is_dict();
  if (t == "boolean") return noargs(), v.is_bool();
  if (t == "true") return noargs(), v.is_bool() && v.AsBool();
  if (t == "false") return noargs(), v.is_bool() && !v.AsBool();
  if (t == "number") return noargs(), v.is_number();
  if (t == "integer") return noargs(), v.is_int();
  if (t == "float") return noargs(), v.is_float();
  if (t == "callable") return noargs(), v.is_callable();
  if (t == "escaped") return noargs(), v.is_markup();
  if (t == "iterable") {
    noargs();
    return v.kind() == K::kUndefined || v.is_string() || v.is_sequence_like() || v.is_dict();
  }
  if (t == "sequence") {
    noargs();
    return v.kind() == K::kUndefined || v.is_string() || v.is_sequence_like() || v.is_dict();
  }
  if (t == "lower" || t == "upper") {
    noargs();
    ValueList none;
    KwArgs nk;
    return CallMethod(in, Value::String(v.Str()), t == "lower" ? "islower" : "isupper", none, nk).AsBool();
  }
  if (t == "odd" || t == "even") {
    noargs();
    Value r = BinaryOp("%", v, Value::Int(2));
    return (t == "odd") == (r.AsDouble() == 1);
  }
  if (t == "divisibleby") {
    Value r = BinaryOp("%", v, arg("num"));
    return r.AsDouble() == 0;
  }
  if (t == "eq" || t == "equalto" || t == "==") return Equals(v, arg("other"));
  if (t == "ne" || t == "!=") return !Equals(v, arg("other"));
  if (t == "sameas") {
    Value o = arg("other");
    if (v.is_none() || o.is_none() || v.is_bool() || o.is_bool()) return v.kind() == o.kind() && Equals(v, o);
    return Equals(v, o);
  }
  if (t == "lt" || t == "lessthan" || t == "<") return LessThan(v, arg("other"));
  if (t == "gt" || t == "greaterthan" || t == ">") return LessThan(arg("other"), v);
  if (t == "le" || t == "<=") return !LessThan(arg("other"), v);
  if (t == "ge" || t == ">=") return !LessThan(v, arg("other"));
  if (t == "in") return Contains(arg("seq"), v);
  throw TemplateError("no test named '" + t + "' (unsupported)");
}

}  // namespace tarmac::chat_template
