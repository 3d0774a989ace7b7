// Value: one GGUF metadata value (any of the 13 GGUF value types, arrays of any element type
// including nested arrays), as read from or written to a GGUF file.
//
// A Value owns its payload (strings and array elements are copies, never views into a file).
// Scalars keep their exact bit pattern, so a value read and written again is byte-identical
// (NaN payloads included). Immutable after construction; const methods are safe to call from
// many threads; copyable and movable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace tarmac::gguf {

// Numbered exactly as GGUF stores them.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint8", "int32", "float32", "bool", "string", "array", ...; "?" for an id out of range.
const char* ValueTypeName(ValueType t);
// True for ids 0..12.
bool IsValidValueType(uint32_t id);
// Bytes a scalar of type t takes in a file; 0 for kString and kArray (variable size).
size_t ScalarSize(ValueType t);

class Value {
 public:
  // A uint8 zero; exists so containers of Value can be resized.
  Value() = default;

  static Value U8(uint8_t v);
  static Value I8(int8_t v);
  static Value U16(uint16_t v);
  static Value I16(int16_t v);
  static Value U32(uint32_t v);
  static Value I32(int32_t v);
  static Value U64(uint64_t v);
  static Value I64(int64_t v);
  static Value F32(float v);
  static Value F64(double v);
  static Value Bool(bool v);
  static Value Str(std::string v);
  // Preconditions (checked, abort on violation: a programming error, not bad input): every
  // item has type `elem`; for elem == kArray nested arrays may have any element types.
  static Value Array(ValueType elem, std::vector<Value> items);
  static Value StrArray(const std::vector<std::string>& items);
  static Value F32Array(std::span<const float> items);
  static Value I32Array(std::span<const int32_t> items);
  // A scalar of type t from its raw little-endian bit pattern (low bytes used); for readers.
  // Preconditions: t is a scalar type (not kString/kArray).
  static Value FromBits(ValueType t, uint64_t bits);

  ValueType type() const { return type_; }
  bool is_array() const { return type_ == ValueType::kArray; }
  // Element type of an array; nullopt if this is not an array.
  std::optional<ValueType> array_type() const;

  // Any integer type (uint8..int64) whose value is >= 0; nullopt otherwise (also for bool).
  std::optional<uint64_t> AsUint64() const;
  // Any integer type whose value fits in int64; nullopt otherwise.
  std::optional<int64_t> AsInt64() const;
  // kFloat32 or kFloat64 only (integers are not silently converted).
  std::optional<double> AsDouble() const;
  std::optional<bool> AsBool() const;
  // nullptr unless this is a kString.
  const std::string* AsString() const;
  // nullptr unless this is a kArray.
  const std::vector<Value>* AsArray() const;
  // Raw bit pattern of a scalar (zero-extended); for writers. Preconditions: scalar type.
  uint64_t bits() const;

  // Numbers as JSON numbers, bools, strings, arrays as JSON arrays. Arrays longer than
  // max_array_items are cut to their first max_array_items elements followed by the string
  // "... (N more)". Non-finite floats become the strings "nan", "inf", "-inf" (JSON has none);
  // invalid UTF-8 in strings is replaced by U+FFFD so the result can always be dumped.
  nlohmann::json ToJson(size_t max_array_items = std::numeric_limits<size_t>::max()) const;
  // One line for humans: 42, 1.5, true, "text" (escaped, cut at 200 bytes),
  // [1, 2, 3, ... (N more)] with at most max_array_items items shown.
  std::string ToString(size_t max_array_items = 8) const;

  // Same type, same element type, same bits / bytes / elements.
  bool operator==(const Value& o) const;

 private:
  ValueType type_ = ValueType::kUint8;
  ValueType elem_ = ValueType::kUint8;  // element type when type_ == kArray
  std::variant<uint64_t, std::string, std::vector<Value>> v_ = uint64_t{0};
};

struct KeyValue {
  std::string key;
  Value value;
};

}  // namespace tarmac::gguf
