// Value: the dynamic value model of the chat-template interpreter, with Python semantics.
//
// A Value is one of: undefined (Jinja's Undefined, carrying a hint for error messages), None,
// bool, int (int64), float (double), str (UTF-8; may be flagged "markup", Jinja's Markup from
// `|safe`), list, tuple, dict (string keys, insertion order like Python dicts), namespace (the
// only mutable object, from namespace()), and callable (macros, globals, bound methods).
// Lists, tuples and dicts are immutable once built (the template runs in Jinja's immutable
// sandbox) and shared by reference; namespaces are shared and mutated through `set ns.x = v`.
//
// Conversions follow Python: Str() is str(x), Repr() is repr(x) (how lists and dicts print),
// Truthy() is bool(x), Equals() is ==. Operations that Python rejects throw TemplateError.
// Thread-safety: a Value may be read from several threads only if no namespace it reaches is
// mutated meanwhile; the interpreter uses each Value from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tarmac::chat_template {

// The one exception type of this module; never escapes the public API (chat_template.h turns
// it into a Status). line/column are 1-based; 0 when unknown.
class TemplateError : public std::runtime_error {
 public:
  explicit TemplateError(std::string message, int line = 0, int column = 0)
      : std::runtime_error(std::move(message)), line_(line), column_(column) {}
  int line() const { return line_; }
  int column() const { return column_; }
  bool has_location() const { return line_ > 0; }

 private:
  int line_;
  int column_;
};

class Value;
class Interpreter;
struct Dict;
struct Namespace;
struct Callable;

using ValueList = std::vector<Value>;
using KwArgs = std::vector<std::pair<std::string, Value>>;

// Containers nest at most this deep (deeper values would overflow the stack when printed,
// compared or destroyed); strings and lists built by the template stay under kMaxBuiltSize.
inline constexpr int kMaxValueDepth = 1000;
inline constexpr int64_t kMaxBuiltSize = 16 << 20;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace, kCallable
  };

  Value() = default;  // undefined
  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s, bool markup = false);
  static Value List(ValueList items);
  static Value Tuple(ValueList items);
  static Value MakeDict(std::shared_ptr<const Dict> d);
  static Value MakeNamespace(std::shared_ptr<Namespace> ns);
  static Value MakeCallable(std::shared_ptr<const Callable> c);
  // JSON -> Value: objects become dicts in document order (needs nlohmann::ordered_json to keep
  // the input's key order; plain json objects arrive sorted).
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence_like() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  // Preconditions: the matching kind (bool accepts bool; AsInt accepts bool and int).
  bool AsBool() const { return b_; }
  int64_t AsInt() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double AsDouble() const;  // int, bool or float
  const std::string& AsString() const { return s_; }
  const ValueList& AsList() const;  // list or tuple
  const Dict& AsDict() const { return *dict_; }
  const std::shared_ptr<const Dict>& dict_ptr() const { return dict_; }
  Namespace& AsNamespace() const { return *ns_; }
  const Callable& AsCallable() const { return *fn_; }
  const std::string& undefined_hint() const { return s_; }

  bool Truthy() const;
  // Python str(x) (undefined -> "") and repr(x). Throw TemplateError past kMaxValueDepth levels
  // (a namespace can contain itself) or kMaxBuiltSize bytes.
  std::string Str() const;
  std::string Repr() const;
  // Nesting depth of a list/tuple/dict (0 for scalars); construction fails past kMaxValueDepth.
  int depth() const { return depth_; }
  // The shared container, for Python's identity shortcut in ==; nullptr for scalars.
  const void* identity() const;
  const char* TypeName() const;  // Python type name: 'str', 'dict', 'NoneType', ...

 private:
  void AppendStr(std::string* out, bool repr, int level) const;

  Kind kind_ = Kind::kUndefined;
  uint16_t depth_ = 0;
  bool b_ = false;
  bool markup_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Namespace> ns_;
  std::shared_ptr<const Callable> fn_;
};

// Ordered string-keyed map (Python dict with str keys). Lookup is linear: template dicts (messages,
// tool schemas, namespaces) are small.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(std::string_view key) const;
  // Sets key (appends when new, replaces in place otherwise, like Python).
  void Set(std::string key, Value v);
  size_t size() const { return items.size(); }
};

// namespace(): a mutable attribute bag shared by reference.
struct Namespace {
  Dict attrs;
};

// A function value. `fn` receives positional and keyword arguments and the interpreter (for
// macros, which render, and for the step limit).
struct Callable {
  std::string name;
  std::function<Value(Interpreter&, ValueList&, KwArgs&)> fn;
};

// Python ==.
bool Equals(const Value& a, const Value& b);
// Python <; throws TemplateError for unorderable types.
bool LessThan(const Value& a, const Value& b);

// Python float repr ("1.0", "1e-05", "1.2345678901234568e+17", "inf", "nan").
std::string FloatRepr(double d);
// Python repr of a str ('abc', "it's", '\n').
std::string StringRepr(std::string_view s);

// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...) as transformers'
// tojson filter does. indent < 0 means None. Throws TemplateError for values JSON cannot hold.
struct JsonDumpOptions {
  int indent = -1;
  std::string indent_str;  // used instead of spaces when indent was given as a string
  bool has_separators = false;
  std::string item_sep;
  std::string key_sep;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string JsonDumps(const Value& v, const JsonDumpOptions& opts);

// Unicode helpers with Python semantics over UTF-8 strings.
std::vector<uint32_t> ToCodepoints(std::string_view s);
std::string FromCodepoints(const std::vector<uint32_t>& cps, size_t begin, size_t end);
size_t CodepointLength(std::string_view s);
bool IsPyWhitespace(uint32_t cp);  // str.isspace()
// Escapes &, <, >, ', " like markupsafe.escape.
std::string HtmlEscape(std::string_view s);

}  // namespace tarmac::chat_template
