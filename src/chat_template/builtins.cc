// Builtins: global functions and the sandbox-safe methods of str, dict and list.
#include "chat_template/builtins.h"

#include <chrono>
#include <ctime>

#include "base/utf8.h"
#include "chat_template/call_args.h"
#include "chat_template/interpreter.h"
#include "chat_template/ops.h"

namespace tarmac::chat_template {
namespace {

// Simple case mapping: ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic.
uint32_t ToUpperCp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
  if (c == 0xff) return 0x178;
  if (c == 0xb5) return 0x39c;
  if (c >= 0x100 && c <= 0x17f) {
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c % 2 == 0) ? c - 1 : c;
    if (c == 0x131) return 'I';
    if (c == 0x17f) return 'S';
    if (c == 0x130 || c == 0x138 || c == 0x149 || c == 0x178) return c;
    return (c % 2 == 1) ? c - 1 : c;
  }
  if (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

uint32_t ToLowerCp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c == 0x178) return 0xff;
  if (c >= 0x100 && c <= 0x17f) {
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17f) return c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) return c + 32;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

bool IsCased(uint32_t c) { return ToUpperCp(c) != c || ToLowerCp(c) != c || c == 0xdf; }

std::string MapCase(const std::string& s, bool upper) {
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t c = DecodeUtf8(s, &pos);
    if (upper && c == 0xdf) {
      out += "SS";
      continue;
    }
    AppendUtf8(upper ? ToUpperCp(c) : ToLowerCp(c), &out);
  }
  return out;
}

const std::string& Str(const Value& v, const char* what) {
  if (!v.is_string()) {
    if (v.is_undefined()) FailUndefined(v);
    throw TemplateError(std::string(what) + " must be str, not " + v.TypeName());
  }
  return v.AsString();
}

ValueList SplitWhitespace(const std::string& s, int64_t maxsplit, bool from_right) {
  std::vector<uint32_t> cps = ToCodepoints(s);
  std::vector<std::pair<size_t, size_t>> words;
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && IsPyWhitespace(cps[i])) ++i;
    if (i == cps.size()) break;
    size_t j = i;
    while (j < cps.size() && !IsPyWhitespace(cps[j])) ++j;
    words.emplace_back(i, j);
    i = j;
  }
  ValueList out;
  if (maxsplit < 0 || static_cast<size_t>(maxsplit) + 1 >= words.size()) {
    for (auto [a, b] : words) out.push_back(Value::String(FromCodepoints(cps, a, b)));
    return out;
  }
  size_t m = static_cast<size_t>(maxsplit);
  if (!from_right) {
    for (size_t k = 0; k < m; ++k) out.push_back(Value::String(FromCodepoints(cps, words[k].first, words[k].second)));
    size_t end = cps.size();
    while (end > words[m].first && IsPyWhitespace(cps[end - 1])) --end;
    out.push_back(Value::String(FromCodepoints(cps, words[m].first, end)));
  } else {
    size_t n = words.size();
    size_t start = 0;
    while (start < words[n - 1 - m].second && IsPyWhitespace(cps[start])) ++start;
    out.push_back(Value::String(FromCodepoints(cps, start, words[n - 1 - m].second)));
    for (size_t k = n - m; k < n; ++k) out.push_back(Value::String(FromCodepoints(cps, words[k].first, words[k].second)));
  }
  return out;
}

ValueList SplitSep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) throw TemplateError("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      size_t p = s.find(sep, start);
      if (p == std::string::npos) break;
      parts.push_back(s.substr(start, p - start));
      start = p + sep.size();
      ++n;
    }
    parts.push_back(s.substr(start));
  } else {
    size_t end = s.size();
    int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      if (end < sep.size()) break;
      size_t p = s.rfind(sep, end - sep.size());
      if (p == std::string::npos) break;
      parts.push_back(s.substr(p + sep.size(), end - p - sep.size()));
      end = p;
      ++n;
    }
    parts.push_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
  }
  ValueList out;
  for (auto& p : parts) out.push_back(Value::String(std::move(p)));
  return out;
}

bool AffixMatch(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    const std::string& x = Str(a, prefix ? "startswith first arg" : "endswith first arg");
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_tuple()) {
    for (const Value& a : affix.AsList()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

int64_t CpIndex(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(CodepointLength(std::string_view(s).substr(0, byte_pos)));
}

bool AllCps(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  size_t pos = 0;
  while (pos < s.size()) {
    if (!pred(DecodeUtf8(s, &pos))) return false;
  }
  return true;
}

Value StrMethod(const std::string& name, const Value& self, ValueList& args, KwArgs& kwargs) {
  const std::string& s = self.AsString();
  const std::string fn = "str." + name;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    CallArgs a(fn, args, kwargs, {"chars"});
    return Value::String(PyStrip(s, a.Get(0), name != "rstrip", name != "lstrip"), self.is_markup());
  }
  if (name == "split" || name == "rsplit") {
    CallArgs a(fn, args, kwargs, {"sep", "maxsplit"});
    Value sep = a.Get(0);
    int64_t maxsplit = a.Has(1) ? a.Get(1).AsInt() : -1;
    if (sep.is_undefined() || sep.is_none()) return Value::List(SplitWhitespace(s, maxsplit, name == "rsplit"));
    return Value::List(SplitSep(s, Str(sep, "separator"), maxsplit, name == "rsplit"));
  }
  if (name == "startswith" || name == "endswith") {
    CallArgs a(fn, args, kwargs, {"prefix"});
    return Value::Bool(AffixMatch(s, a.Required(0, fn), name == "startswith"));
  }
  if (name == "upper") return Value::String(PyUpper(s), self.is_markup());
  if (name == "lower") return Value::String(PyLower(s), self.is_markup());
  if (name == "title") return Value::String(PyTitle(s), self.is_markup());
  if (name == "capitalize") return Value::String(PyCapitalize(s), self.is_markup());
  if (name == "replace") {
    CallArgs a(fn, args, kwargs, {"old", "new", "count"});
    int64_t count = a.Has(2) ? a.Get(2).AsInt() : -1;
    return Value::String(PyReplace(s, Str(a.Required(0, fn), "replace() argument 1"),
                                   Str(a.Required(1, fn), "replace() argument 2"), count), self.is_markup());
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    CallArgs a(fn, args, kwargs, {"sub"});
    const std::string& sub = Str(a.Required(0, fn), "substring");
    if (name == "count") {
      if (sub.empty()) return Value::Int(static_cast<int64_t>(CodepointLength(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::Int(n);
    }
    size_t p = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") throw TemplateError("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CpIndex(s, p));
  }
  if (name == "join") {
    CallArgs a(fn, args, kwargs, {"iterable"});
    std::string out;
    size_t i = 0;
    for (const Value& v : Iterate(a.Required(0, fn))) {
      if (!v.is_string()) {
        throw TemplateError("sequence item " + std::to_string(i) + ": expected str instance, " + v.TypeName() + " found");
      }
      if (i++) out += s;
      out += v.AsString();
    }
    return Value::String(std::move(out));
  }
  if (name == "splitlines") {
    CallArgs a(fn, args, kwargs, {"keepends"});
    bool keep = a.Get(0).Truthy();
    ValueList out;
    size_t start = 0, i = 0;
    while (i < s.size()) {
      if (s[i] == '\n' || s[i] == '\r') {
        size_t end = i;
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        ++i;
        out.push_back(Value::String(s.substr(start, (keep ? i : end) - start)));
        start = i;
      } else {
        ++i;
      }
    }
    if (start < s.size()) out.push_back(Value::String(s.substr(start)));
    return Value::List(std::move(out));
  }
  CallArgs a(fn, args, kwargs, {});
  if (name == "isspace") return Value::Bool(AllCps(s, IsPyWhitespace));
  if (name == "isdigit") return Value::Bool(AllCps(s, [](uint32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") return Value::Bool(AllCps(s, [](uint32_t c) { return IsCased(c) || (c > 0x7f && c != 0xd7 && c != 0xf7 && c >= 0xaa); }));
  if (name == "isalnum") return Value::Bool(AllCps(s, [](uint32_t c) { return (c >= '0' && c <= '9') || IsCased(c); }));
  if (name == "islower" || name == "isupper") {
    bool any_cased = false;
    size_t pos = 0;
    while (pos < s.size()) {
      uint32_t c = DecodeUtf8(s, &pos);
      if (!IsCased(c)) continue;
      any_cased = true;
      if (name == "islower" ? ToLowerCp(c) != c : ToUpperCp(c) != c) return Value::Bool(false);
    }
    return Value::Bool(any_cased);
  }
  throw TemplateError("'str' object has no attribute '" + name + "'");
}

const char* const kStrMethods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith",
                                   "endswith", "upper", "lower", "title", "capitalize", "replace",
                                   "find", "rfind", "index", "rindex", "count", "join", "splitlines",
                                   "isspace", "isdigit", "isalpha", "isalnum", "islower", "isupper"};
const char* const kDictMethods[] = {"get", "items", "keys", "values"};
const char* const kListMethods[] = {"index", "count"};
const char* const kListUnsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
const char* const kDictUnsafe[] = {"pop", "popitem", "update", "setdefault", "clear"};

template <size_t N>
bool In(const char* const (&arr)[N], const std::string& name) {
  for (const char* m : arr) {
    if (name == m) return true;
  }
  return false;
}

std::string Strftime(const std::string& fmt, const std::optional<std::tm>& fixed) {
  std::tm tm{};
  if (fixed) {
    tm = *fixed;
    std::tm copy = tm;
    std::time_t t = timegm(&copy);  // normalises and fills wday/yday
    gmtime_r(&t, &tm);
  } else {
    std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    localtime_r(&t, &tm);
  }
  // datetime.strftime: naive datetimes give empty %z/%Z; %f is microseconds.
  std::string f;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      char c = fmt[i + 1];
      if (c == 'z' || c == 'Z') {
        ++i;
        continue;
      }
      if (c == 'f') {
        f += "000000";
        ++i;
        continue;
      }
      f += fmt[i];
      f += fmt[++i];
      continue;
    }
    f += fmt[i];
  }
  if (f.empty()) return "";
  std::string out(f.size() * 4 + 64, '\0');
  size_t n = std::strftime(out.data(), out.size(), f.c_str(), &tm);
  out.resize(n);
  return out;
}

Value MakeFn(const char* name, std::function<Value(Interpreter&, ValueList&, KwArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = name;
  c->fn = std::move(fn);
  return Value::MakeCallable(std::move(c));
}

}  // namespace

std::string PyStrip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<uint32_t> cps = ToCodepoints(s);
  std::vector<uint32_t> set;
  bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) set = ToCodepoints(Str(chars, "strip arg"));
  auto strip_it = [&](uint32_t c) {
    return ws ? IsPyWhitespace(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  return FromCodepoints(cps, b, e);
}

std::string PyUpper(const std::string& s) { return MapCase(s, true); }
std::string PyLower(const std::string& s) { return MapCase(s, false); }

std::string PyTitle(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t c = DecodeUtf8(s, &pos);
    AppendUtf8(prev_cased ? ToLowerCp(c) : ToUpperCp(c), &out);
    prev_cased = IsCased(c);
  }
  return out;
}

std::string PyCapitalize(const std::string& s) {
  std::string out;
  size_t pos = 0;
  bool first = true;
  while (pos < s.size()) {
    uint32_t c = DecodeUtf8(s, &pos);
    AppendUtf8(first ? ToUpperCp(c) : ToLowerCp(c), &out);
    first = false;
  }
  return out;
}

std::string PyReplace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    std::vector<uint32_t> cps = ToCodepoints(s);
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      if (i < cps.size()) AppendUtf8(cps[i], &out);
    }
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t p = s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += repl;
    start = p + old.size();
    ++n;
    if (out.size() > static_cast<size_t>(kMaxBuiltSize)) throw TemplateError("replace() result too large");
  }
  out.append(s, start, std::string::npos);
  return out;
}

bool HasMethod(const Value& obj, const std::string& name) {
  if (obj.is_string()) return In(kStrMethods, name);
  if (obj.is_dict()) return In(kDictMethods, name);
  if (obj.is_sequence_like()) return In(kListMethods, name);
  return false;
}

bool IsUnsafeMethod(const Value& obj, const std::string& name) {
  if (obj.is_list()) return In(kListUnsafe, name);
  if (obj.is_dict()) return In(kDictUnsafe, name);
  return false;
}

Value CallMethod(Interpreter& in, const Value& obj, const std::string& name, ValueList& args, KwArgs& kwargs) {
  in.Step();
  if (obj.is_string()) return StrMethod(name, obj, args, kwargs);
  if (obj.is_dict()) {
    const Dict& d = obj.AsDict();
    if (name == "get") {
      CallArgs a("dict.get", args, kwargs, {"key", "default"});
      const Value& key = a.Required(0, "dict.get");
      if (key.is_string()) {
        if (const Value* v = d.Find(key.AsString())) return *v;
      }
      return a.GetOr(1, Value::None());
    }
    CallArgs a("dict." + name, args, kwargs, {});
    ValueList out;
    for (const auto& [k, v] : d.items) {
      if (name == "items") out.push_back(Value::Tuple({Value::String(k), v}));
      else if (name == "keys") out.push_back(Value::String(k));
      else out.push_back(v);
    }
    return Value::List(std::move(out));
  }
  if (obj.is_sequence_like()) {
    CallArgs a("list." + name, args, kwargs, {"value"});
    const Value& x = a.Required(0, "list." + name);
    const ValueList& items = obj.AsList();
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (Equals(items[i], x)) {
        if (name == "index") return Value::Int(static_cast<int64_t>(i));
        ++n;
      }
    }
    if (name == "index") throw TemplateError(x.Repr() + " is not in list");
    return Value::Int(n);
  }
  throw TemplateError(std::string("'") + obj.TypeName() + "' object has no attribute '" + name + "'");
}

Value BoundMethod(const Value& obj, const std::string& name) {
  auto c = std::make_shared<Callable>();
  c->name = std::string(obj.TypeName()) + "." + name;
  c->fn = [obj, name](Interpreter& in, ValueList& args, KwArgs& kwargs) {
    return CallMethod(in, obj, name, args, kwargs);
  };
  return Value::MakeCallable(std::move(c));
}

void AddBuiltinGlobals(Dict* g) {
  g->Set("range", MakeFn("range", [](Interpreter& in, ValueList& args, KwArgs& kwargs) {
    if (!kwargs.empty()) throw TemplateError("range() takes no keyword arguments");
    if (args.empty() || args.size() > 3) throw TemplateError("range expected 1 to 3 arguments");
    for (const Value& a : args) {
      if (!a.is_int() && !a.is_bool()) {
        throw TemplateError(std::string("'") + a.TypeName() + "' object cannot be interpreted as an integer");
      }
    }
    int64_t start = 0, stop, step = 1;
    if (args.size() == 1) {
      stop = args[0].AsInt();
    } else {
      start = args[0].AsInt();
      stop = args[1].AsInt();
      if (args.size() == 3) step = args[2].AsInt();
    }
    if (step == 0) throw TemplateError("range() arg 3 must not be zero");
    ValueList out;
    // Jinja's sandbox refuses ranges longer than 100000 (MAX_RANGE).
    long double len = step > 0 ? (static_cast<long double>(stop) - start) / step
                               : (static_cast<long double>(start) - stop) / -step;
    if (len > 100000) throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      in.Step();
      out.push_back(Value::Int(i));
    }
    return Value::List(std::move(out));
  }));
  g->Set("namespace", MakeFn("namespace", [](Interpreter& in, ValueList& args, KwArgs& kwargs) {
    Dict attrs;
    if (args.size() > 1) throw TemplateError("namespace() takes at most 1 positional argument");
    if (args.size() == 1) {
      if (!args[0].is_dict()) throw TemplateError("namespace() argument must be a mapping");
      attrs = args[0].AsDict();
    }
    for (auto& [k, v] : kwargs) attrs.Set(k, v);
    return in.NewNamespace(std::move(attrs));
  }));
  g->Set("dict", MakeFn("dict", [](Interpreter&, ValueList& args, KwArgs& kwargs) {
    auto d = std::make_shared<Dict>();
    if (args.size() > 1) throw TemplateError("dict expected at most 1 argument");
    if (args.size() == 1) {
      if (!args[0].is_dict()) throw TemplateError("dict() argument must be a mapping here");
      *d = args[0].AsDict();
    }
    for (auto& [k, v] : kwargs) d->Set(k, v);
    return Value::MakeDict(std::move(d));
  }));
  g->Set("raise_exception", MakeFn("raise_exception", [](Interpreter&, ValueList& args, KwArgs& kwargs) -> Value {
    CallArgs a("raise_exception", args, kwargs, {"message"});
    throw TemplateError("template raised an exception: " + a.Get(0).Str());
  }));
  g->Set("strftime_now", MakeFn("strftime_now", [](Interpreter& in, ValueList& args, KwArgs& kwargs) {
    CallArgs a("strftime_now", args, kwargs, {"format"});
    return Value::String(Strftime(Str(a.Required(0, "strftime_now"), "strftime() argument 1"), in.now()));
  }));
}

}  // namespace tarmac::chat_template
