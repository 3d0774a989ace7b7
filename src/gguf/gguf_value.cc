#include "gguf/gguf_value.h"

#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "base/check.h"
#include "base/utf8.h"
#include "gguf/gguf_internal.h"

namespace tarmac::gguf {

static_assert(std::endian::native == std::endian::little,
              "tarmac's GGUF code reads little-endian integers with memcpy");

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8: return "uint8";
    case ValueType::kInt8: return "int8";
    case ValueType::kUint16: return "uint16";
    case ValueType::kInt16: return "int16";
    case ValueType::kUint32: return "uint32";
    case ValueType::kInt32: return "int32";
    case ValueType::kFloat32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "uint64";
    case ValueType::kInt64: return "int64";
    case ValueType::kFloat64: return "float64";
  }
  return "?";
}

bool IsValidValueType(uint32_t id) { return id <= 12; }

size_t ScalarSize(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    case ValueType::kString:
    case ValueType::kArray: return 0;
  }
  return 0;
}

namespace {

bool IsScalar(ValueType t) { return ScalarSize(t) != 0; }

template <typename T>
uint64_t BitsOf(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

template <typename T>
T FromBitsAs(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

std::string FormatDouble(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return fmt::format("{}", d);
}

}  // namespace

Value Value::FromBits(ValueType t, uint64_t bits) {
  TARMAC_CHECK(IsScalar(t));
  Value v;
  v.type_ = t;
  size_t n = ScalarSize(t);
  v.v_ = n == 8 ? bits : (bits & ((uint64_t{1} << (8 * n)) - 1));
  return v;
}

Value Value::U8(uint8_t x) { return FromBits(ValueType::kUint8, BitsOf(x)); }
Value Value::I8(int8_t x) { return FromBits(ValueType::kInt8, BitsOf(x)); }
Value Value::U16(uint16_t x) { return FromBits(ValueType::kUint16, BitsOf(x)); }
Value Value::I16(int16_t x) { return FromBits(ValueType::kInt16, BitsOf(x)); }
Value Value::U32(uint32_t x) { return FromBits(ValueType::kUint32, BitsOf(x)); }
Value Value::I32(int32_t x) { return FromBits(ValueType::kInt32, BitsOf(x)); }
Value Value::U64(uint64_t x) { return FromBits(ValueType::kUint64, x); }
Value Value::I64(int64_t x) { return FromBits(ValueType::kInt64, BitsOf(x)); }
Value Value::F32(float x) { return FromBits(ValueType::kFloat32, BitsOf(x)); }
Value Value::F64(double x) { return FromBits(ValueType::kFloat64, BitsOf(x)); }
Value Value::Bool(bool x) { return FromBits(ValueType::kBool, x ? 1 : 0); }

Value Value::Str(std::string x) {
  Value v;
  v.type_ = ValueType::kString;
  v.v_ = std::move(x);
  return v;
}

Value Value::Array(ValueType elem, std::vector<Value> items) {
  TARMAC_CHECK(IsValidValueType(static_cast<uint32_t>(elem)));
  for (const auto& it : items) TARMAC_CHECK(it.type() == elem);
  Value v;
  v.type_ = ValueType::kArray;
  v.elem_ = elem;
  v.v_ = std::move(items);
  return v;
}

Value Value::StrArray(const std::vector<std::string>& items) {
  std::vector<Value> vs;
  vs.reserve(items.size());
  for (const auto& s : items) vs.push_back(Str(s));
  return Array(ValueType::kString, std::move(vs));
}

Value Value::F32Array(std::span<const float> items) {
  std::vector<Value> vs;
  vs.reserve(items.size());
  for (float f : items) vs.push_back(F32(f));
  return Array(ValueType::kFloat32, std::move(vs));
}

Value Value::I32Array(std::span<const int32_t> items) {
  std::vector<Value> vs;
  vs.reserve(items.size());
  for (int32_t x : items) vs.push_back(I32(x));
  return Array(ValueType::kInt32, std::move(vs));
}

std::optional<ValueType> Value::array_type() const {
  if (type_ != ValueType::kArray) return std::nullopt;
  return elem_;
}

uint64_t Value::bits() const {
  TARMAC_CHECK(IsScalar(type_));
  return std::get<uint64_t>(v_);
}

std::optional<int64_t> Value::AsInt64() const {
  if (!IsScalar(type_)) return std::nullopt;
  uint64_t b = std::get<uint64_t>(v_);
  switch (type_) {
    case ValueType::kUint8:
    case ValueType::kUint16:
    case ValueType::kUint32: return static_cast<int64_t>(b);
    case ValueType::kUint64:
      if (b > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
      return static_cast<int64_t>(b);
    case ValueType::kInt8: return FromBitsAs<int8_t>(b);
    case ValueType::kInt16: return FromBitsAs<int16_t>(b);
    case ValueType::kInt32: return FromBitsAs<int32_t>(b);
    case ValueType::kInt64: return FromBitsAs<int64_t>(b);
    default: return std::nullopt;
  }
}

std::optional<uint64_t> Value::AsUint64() const {
  if (type_ == ValueType::kUint64) return std::get<uint64_t>(v_);
  auto i = AsInt64();
  if (!i || *i < 0) return std::nullopt;
  return static_cast<uint64_t>(*i);
}

std::optional<double> Value::AsDouble() const {
  if (type_ == ValueType::kFloat32) return FromBitsAs<float>(std::get<uint64_t>(v_));
  if (type_ == ValueType::kFloat64) return FromBitsAs<double>(std::get<uint64_t>(v_));
  return std::nullopt;
}

std::optional<bool> Value::AsBool() const {
  if (type_ != ValueType::kBool) return std::nullopt;
  return std::get<uint64_t>(v_) != 0;
}

const std::string* Value::AsString() const { return std::get_if<std::string>(&v_); }

const std::vector<Value>* Value::AsArray() const {
  return std::get_if<std::vector<Value>>(&v_);
}

nlohmann::json Value::ToJson(size_t max_array_items) const {
  switch (type_) {
    case ValueType::kBool: return *AsBool();
    case ValueType::kString: return SanitizeUtf8(*AsString());
    case ValueType::kFloat32:
    case ValueType::kFloat64: {
      double d = *AsDouble();
      if (!std::isfinite(d)) return FormatDouble(d);
      return d;
    }
    case ValueType::kUint64: return std::get<uint64_t>(v_);
    case ValueType::kArray: {
      const auto& items = *AsArray();
      nlohmann::json arr = nlohmann::json::array();
      size_t n = std::min(items.size(), max_array_items);
      for (size_t i = 0; i < n; ++i) arr.push_back(items[i].ToJson(max_array_items));
      if (n < items.size()) arr.push_back(fmt::format("... ({} more)", items.size() - n));
      return arr;
    }
    default: return *AsInt64();  // every other scalar is an integer fitting int64
  }
}

std::string Value::ToString(size_t max_array_items) const {
  switch (type_) {
    case ValueType::kBool: return *AsBool() ? "true" : "false";
    case ValueType::kString: {
      const std::string& s = *AsString();
      std::string out = "\"";
      size_t n = std::min<size_t>(s.size(), 200);
      for (size_t i = 0; i < n; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == '"' || c == '\\') {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c == '\n') {
          out += "\\n";
        } else if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);  // UTF-8 bytes pass through
        }
      }
      out += '"';
      if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
      return out;
    }
    case ValueType::kFloat32:
    case ValueType::kFloat64: return FormatDouble(*AsDouble());
    case ValueType::kUint64: return fmt::format("{}", std::get<uint64_t>(v_));
    case ValueType::kArray: {
      const auto& items = *AsArray();
      std::string out = "[";
      size_t n = std::min(items.size(), max_array_items);
      for (size_t i = 0; i < n; ++i) {
        if (i) out += ", ";
        out += items[i].ToString(max_array_items);
      }
      if (n < items.size()) out += fmt::format("{}... ({} more)", n ? ", " : "", items.size() - n);
      out += "]";
      return out;
    }
    default: return fmt::format("{}", *AsInt64());
  }
}

bool Value::operator==(const Value& o) const {
  if (type_ != o.type_) return false;
  if (type_ == ValueType::kArray && elem_ != o.elem_) return false;
  return v_ == o.v_;
}

}  // namespace tarmac::gguf
