// Python operator semantics (see ops.h).
#include "chat_template/ops.h"

#include <cmath>

namespace tarmac::chat_template {
namespace {

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  throw TemplateError("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" +
                      b.TypeName() + "'");
}

bool IsIntLike(const Value& v) { return v.is_int() || v.is_bool(); }

[[noreturn]] void Overflow() { throw TemplateError("integer result out of range (64-bit)"); }

Value Repeat(const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value::String("") : seq.is_tuple() ? Value::Tuple({}) : Value::List({});
  if (seq.is_string()) {
    if (static_cast<double>(seq.AsString().size()) * static_cast<double>(n) > kMaxBuiltSize) {
      throw TemplateError("string repetition result too large");
    }
    std::string out;
    out.reserve(seq.AsString().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.AsString();
    return Value::String(std::move(out));
  }
  const ValueList& items = seq.AsList();
  if (static_cast<double>(items.size()) * static_cast<double>(n) > kMaxBuiltSize) {
    throw TemplateError("list repetition result too large");
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

double FloorDiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

double PyFmod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

// Clamps slice bounds like PySlice_AdjustIndices; returns the selected indices.
std::vector<int64_t> SliceIndices(int64_t len, const Value& start_v, const Value& stop_v, const Value& step_v) {
  auto as_int = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!IsIntLike(v)) {
      throw TemplateError(std::string("slice ") + what + " must be an integer or None, not '" + v.TypeName() + "'");
    }
    return v.AsInt();
  };
  int64_t step = as_int(step_v, "step").value_or(1);
  if (step == 0) throw TemplateError("slice step cannot be zero");
  auto start_o = as_int(start_v, "start");
  auto stop_o = as_int(stop_v, "stop");
  int64_t start, stop;
  if (step > 0) {
    start = start_o.value_or(0);
    stop = stop_o.value_or(len);
    if (start < 0) start = std::max<int64_t>(start + len, 0);
    if (stop < 0) stop = std::max<int64_t>(stop + len, 0);
    start = std::min(start, len);
    stop = std::min(stop, len);
  } else {
    start = start_o.value_or(len - 1);
    stop = stop_o.has_value() ? *stop_o : -1 - len;
    if (start < 0) start = std::max<int64_t>(start + len, -1);
    else start = std::min(start, len - 1);
    if (stop < 0) stop = std::max<int64_t>(stop + len, -1);
    else stop = std::min(stop, len - 1);
  }
  std::vector<int64_t> idx;
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) idx.push_back(i);
  } else {
    for (int64_t i = start; i > stop; i += step) idx.push_back(i);
  }
  return idx;
}

}  // namespace

std::string UndefinedMessage(const Value& v) {
  return v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint();
}

void FailUndefined(const Value& v) { throw TemplateError(UndefinedMessage(v)); }

Value BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  if (a.is_number() && b.is_number()) {
    bool ints = IsIntLike(a) && IsIntLike(b);
    if (ints) {
      int64_t x = a.AsInt(), y = b.AsInt(), r = 0;
      if (op == "+") {
        if (__builtin_add_overflow(x, y, &r)) Overflow();
        return Value::Int(r);
      }
      if (op == "-") {
        if (__builtin_sub_overflow(x, y, &r)) Overflow();
        return Value::Int(r);
      }
      if (op == "*") {
        if (__builtin_mul_overflow(x, y, &r)) Overflow();
        return Value::Int(r);
      }
      if (op == "/") {
        if (y == 0) throw TemplateError("division by zero");
        return Value::Float(static_cast<double>(x) / static_cast<double>(y));
      }
      if (op == "//" || op == "%") {
        if (y == 0) throw TemplateError("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) throw TemplateError("integer result out of range (64-bit)");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          q -= 1;
          m += y;
        }
        return Value::Int(op == "//" ? q : m);
      }
      if (op == "**") {
        if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
        int64_t result = 1, base = x;
        while (y > 0) {
          if ((y & 1) && __builtin_mul_overflow(result, base, &result)) Overflow();
          y >>= 1;
          if (y && __builtin_mul_overflow(base, base, &base)) Overflow();
        }
        return Value::Int(result);
      }
    } else {
      double x = a.AsDouble(), y = b.AsDouble();
      if (op == "+") return Value::Float(x + y);
      if (op == "-") return Value::Float(x - y);
      if (op == "*") return Value::Float(x * y);
      if (op == "/") {
        if (y == 0) throw TemplateError("float division by zero");
        return Value::Float(x / y);
      }
      if (op == "//") {
        if (y == 0) throw TemplateError("float floor division by zero");
        return Value::Float(FloorDiv(x, y));
      }
      if (op == "%") {
        if (y == 0) throw TemplateError("float modulo");
        return Value::Float(PyFmod(x, y));
      }
      if (op == "**") {
        if (x == 0 && y < 0) throw TemplateError("0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) throw TemplateError("negative number cannot be raised to a fractional power");
        return Value::Float(std::pow(x, y));
      }
    }
    Unsupported(op, a, b);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      // markupsafe: Markup + str escapes the plain side, and so does str + Markup.
      if (a.AsString().size() + b.AsString().size() > static_cast<size_t>(kMaxBuiltSize)) {
        throw TemplateError("string concatenation result too large");
      }
      if (a.is_markup() || b.is_markup()) {
        std::string l = a.is_markup() ? a.AsString() : HtmlEscape(a.AsString());
        std::string r = b.is_markup() ? b.AsString() : HtmlEscape(b.AsString());
        return Value::String(l + r, true);
      }
      return Value::String(a.AsString() + b.AsString());
    }
    if (a.kind() == b.kind() && a.is_sequence_like()) {
      if (a.AsList().size() + b.AsList().size() > static_cast<size_t>(kMaxBuiltSize)) {
        throw TemplateError("list concatenation result too large");
      }
      ValueList out = a.AsList();
      out.insert(out.end(), b.AsList().begin(), b.AsList().end());
      return a.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
    }
    if (a.is_string() && !b.is_string()) {
      throw TemplateError(std::string("can only concatenate str (not \"") + b.TypeName() + "\") to str");
    }
    if (a.is_list() && !b.is_list()) {
      throw TemplateError(std::string("can only concatenate list (not \"") + b.TypeName() + "\") to list");
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_sequence_like()) && IsIntLike(b)) return Repeat(a, b.AsInt());
    if ((b.is_string() || b.is_sequence_like()) && IsIntLike(a)) return Repeat(b, a.AsInt());
  }
  if (op == "%" && a.is_string()) throw TemplateError("printf-style string formatting (%) is not supported");
  Unsupported(op, a, b);
}

Value Negate(const Value& v, bool negate) {
  if (v.is_undefined()) FailUndefined(v);
  if (IsIntLike(v)) {
    if (!negate) return Value::Int(v.AsInt());
    if (v.AsInt() == INT64_MIN) throw TemplateError("integer result out of range (64-bit)");
    return Value::Int(-v.AsInt());
  }
  if (v.is_float()) return Value::Float(negate ? -v.AsDouble() : v.AsDouble());
  throw TemplateError(std::string("bad operand type for unary ") + (negate ? "-" : "+") + ": '" + v.TypeName() + "'");
}

bool Contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!needle.is_string()) {
        if (needle.is_undefined()) FailUndefined(needle);
        throw TemplateError(std::string("'in <string>' requires string as left operand, not ") + needle.TypeName());
      }
      return haystack.AsString().find(needle.AsString()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& v : haystack.AsList()) {
        if (Equals(v, needle)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (needle.is_list() || needle.is_dict()) {
        throw TemplateError(std::string("unhashable type: '") + needle.TypeName() + "'");
      }
      return needle.is_string() && haystack.AsDict().Find(needle.AsString()) != nullptr;
    default:
      throw TemplateError(std::string("argument of type '") + haystack.TypeName() + "' is not iterable");
  }
}

Value Subscript(const Value& obj, const Value& key) {
  if (obj.is_undefined()) FailUndefined(obj);
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.AsDict().Find(key.AsString())) return *v;
    }
    return Value::Undefined("'dict object' has no attribute " + key.Repr());
  }
  if (obj.is_namespace() && key.is_string()) {
    if (const Value* v = obj.AsNamespace().attrs.Find(key.AsString())) return *v;
    return Value::Undefined("'Namespace' object has no attribute " + key.Repr());
  }
  if ((obj.is_string() || obj.is_sequence_like()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.AsInt();
    if (obj.is_string()) {
      std::vector<uint32_t> cps = ToCodepoints(obj.AsString());
      int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined("str object has no element " + key.Repr());
      return Value::String(FromCodepoints(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
    }
    const ValueList& items = obj.AsList();
    int64_t n = static_cast<int64_t>(items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::Undefined(std::string(obj.TypeName()) + " object has no element " + key.Repr());
    return items[static_cast<size_t>(i)];
  }
  return Value::Undefined(std::string("'") + obj.TypeName() + " object' has no attribute " + key.Repr());
}

Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) FailUndefined(obj);
  if (obj.is_string()) {
    std::vector<uint32_t> cps = ToCodepoints(obj.AsString());
    std::string out;
    for (int64_t i : SliceIndices(static_cast<int64_t>(cps.size()), start, stop, step)) {
      out += FromCodepoints(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1);
    }
    return Value::String(std::move(out));
  }
  if (obj.is_sequence_like()) {
    const ValueList& items = obj.AsList();
    ValueList out;
    for (int64_t i : SliceIndices(static_cast<int64_t>(items.size()), start, stop, step)) {
      out.push_back(items[static_cast<size_t>(i)]);
    }
    return obj.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  return Value::Undefined(std::string("'") + obj.TypeName() + " object' cannot be sliced");
}

ValueList Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList:
    case Value::Kind::kTuple: return v.AsList();
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& kv : v.AsDict().items) keys.push_back(Value::String(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      std::vector<uint32_t> cps = ToCodepoints(v.AsString());
      for (size_t i = 0; i < cps.size(); ++i) chars.push_back(Value::String(FromCodepoints(cps, i, i + 1)));
      return chars;
    }
    default: throw TemplateError(std::string("'") + v.TypeName() + "' object is not iterable");
  }
}

}  // namespace tarmac::chat_template
