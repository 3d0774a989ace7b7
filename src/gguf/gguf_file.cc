// GGUF reader. Layout (all little-endian):
//   "GGUF" u32 version  u64 n_tensors  u64 n_kv
//   n_kv × { string key, u32 value_type, value }
//   n_tensors × { string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type, u64 offset }
//   zero padding to a multiple of the alignment, then the data section.
// string = u64 length + bytes; array value = u32 element type + u64 count + elements.
//
// Every read goes through Cursor, which checks the remaining bytes first; every count is
// checked against the bytes left (times the smallest encoding of one item) before anything is
// allocated for it.
#include "gguf/gguf_file.h"

#include <algorithm>
#include <concepts>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "base/utf8.h"
#include "gguf/gguf_internal.h"

namespace tarmac::gguf {

using internal::Printable;

namespace {

// Smallest possible encodings, used to reject absurd counts before allocating.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;             // key len, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, 1 dim, type, off

uint64_t MinEncodedSize(ValueType t) {
  if (t == ValueType::kString) return 8;
  if (t == ValueType::kArray) return 12;
  return ScalarSize(t);
}

const char* RemovedTypeName(uint32_t id) {
  switch (id) {
    case 4: return "Q4_2";
    case 5: return "Q4_3";
    case 31: return "Q4_0_4_4";
    case 32: return "Q4_0_4_8";
    case 33: return "Q4_0_8_8";
    case 36: return "IQ4_NL_4_4";
    case 37: return "IQ4_NL_4_8";
    case 38: return "IQ4_NL_8_8";
    default: return nullptr;
  }
}

uint32_t ByteSwap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00) | ((v << 8) & 0xff0000) | (v << 24);
}

}  // namespace

// Parses into a File. A class (friend of File) so the parse state — where we are, which
// field we are in — lives in one place and error messages can name the field.
class Parser {
 public:
  Parser(std::span<const uint8_t> b, File* f) : b_(b), f_(f) {}

  Status Run() {
    TARMAC_RETURN_IF_ERROR(ParseHeader());
    TARMAC_RETURN_IF_ERROR(ParseMetadata());
    TARMAC_RETURN_IF_ERROR(ParseAlignment());
    TARMAC_RETURN_IF_ERROR(ParseTensorInfos());
    TARMAC_RETURN_IF_ERROR(PlaceTensors());
    BuildIndices();
    return Status::Ok();
  }

 private:
  uint64_t left() const { return b_.size() - pos_; }

  template <typename... Args>
  Status Err(const std::string& field, uint64_t at, fmt::format_string<Args...> f,
             Args&&... args) {
    return DataLoss("gguf: {} at offset {}: {}", field, at,
                    fmt::format(f, std::forward<Args>(args)...));
  }

  // Field names are passed as strings or as lambdas building them, so the hot path (a vocabulary
  // of 100k strings) formats nothing unless there is an error.
  static std::string Name(std::string_view s) { return std::string(s); }
  template <typename F>
    requires std::invocable<const F&>
  static std::string Name(const F& f) {
    return f();
  }

  template <typename F>
  Status Need(const F& field, uint64_t n) {
    if (n > left())
      return Err(Name(field), pos_, "needs {} bytes, file ends after {} (truncated)", n, left());
    return Status::Ok();
  }

  template <typename T, typename F>
  Status Read(const F& field, T* out) {
    TARMAC_RETURN_IF_ERROR(Need(field, sizeof(T)));
    std::memcpy(out, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  // Reads a GGUF string as a view into the input (valid as long as the bytes are).
  template <typename F>
  Status ReadString(const F& field, std::string_view* out) {
    uint64_t at = pos_;
    uint64_t len = 0;
    TARMAC_RETURN_IF_ERROR(Read([&] { return Name(field) + " length"; }, &len));
    if (len > left())
      return Err(Name(field) + " length", at, "string of {} bytes, only {} bytes left in the file",
                 len, left());
    *out = std::string_view(reinterpret_cast<const char*>(b_.data() + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

  Status ParseHeader() {
    if (b_.size() < 4 || std::memcmp(b_.data(), internal::kMagic, 4) != 0) {
      std::string_view got(reinterpret_cast<const char*>(b_.data()), std::min<size_t>(4, b_.size()));
      return Err("magic", 0, "expected 'GGUF', found '{}' ({} bytes in file): not a GGUF file",
                 Printable(got), b_.size());
    }
    pos_ = 4;
    TARMAC_RETURN_IF_ERROR(Read("version", &f_->version_));
    uint32_t v = f_->version_;
    if (v != 2 && v != 3) {
      uint32_t swapped = ByteSwap32(v);
      if (swapped >= 1 && swapped <= 3)
        return Err("version", 4,
                   "reads as {} (byte-swapped {}): a big-endian GGUF file; only little-endian "
                   "files are supported", v, swapped);
      if (v == 1)
        return Err("version", 4, "version 1 (32-bit counts, 2023) is not supported; "
                   "re-convert the model to GGUF v3");
      return Err("version", 4, "unsupported version {} (supported: 2, 3)", v);
    }
    TARMAC_RETURN_IF_ERROR(Read("tensor count", &n_tensors_));
    TARMAC_RETURN_IF_ERROR(Read("kv count", &n_kv_));
    // The body must hold at least the smallest encoding of every announced item.
    uint64_t rest = left();
    if (n_kv_ > rest / kMinKvBytes)
      return Err("kv count", 16, "{} key-value pairs need at least {} bytes each, only {} bytes "
                 "follow the header", n_kv_, kMinKvBytes, rest);
    uint64_t after_kv = rest - n_kv_ * kMinKvBytes;
    if (n_tensors_ > after_kv / kMinTensorInfoBytes)
      return Err("tensor count", 8, "{} tensor infos need at least {} bytes each, only {} bytes "
                 "follow the header and {} key-value pairs", n_tensors_, kMinTensorInfoBytes,
                 rest, n_kv_);
    return Status::Ok();
  }

  std::string KvField(uint64_t i, std::string_view key, std::string_view what) const {
    return fmt::format("kv {} '{}' {}", i, Printable(key), what);
  }

  Status ParseMetadata() {
    f_->metadata_.reserve(n_kv_);
    std::unordered_set<std::string_view> seen;
    for (uint64_t i = 0; i < n_kv_; ++i) {
      uint64_t key_at = pos_;
      std::string_view key;
      TARMAC_RETURN_IF_ERROR(ReadString(fmt::format("kv {} key", i), &key));
      if (key.empty()) return Err(fmt::format("kv {} key", i), key_at, "empty key");
      if (!IsValidUtf8(key))
        return Err(KvField(i, key, "key"), key_at, "key is not valid UTF-8");
      if (!seen.insert(key).second)
        return Err(KvField(i, key, "key"), key_at, "duplicate key (already defined earlier)");
      uint64_t type_at = pos_;
      uint32_t type_id = 0;
      TARMAC_RETURN_IF_ERROR(Read(KvField(i, key, "value type"), &type_id));
      if (!IsValidValueType(type_id))
        return Err(KvField(i, key, "value type"), type_at, "unknown value type {} (valid: 0..12)",
                   type_id);
      Value v;
      TARMAC_RETURN_IF_ERROR(ReadValue(i, key, static_cast<ValueType>(type_id), 0, &v));
      f_->metadata_.push_back(KeyValue{std::string(key), std::move(v)});
    }
    return Status::Ok();
  }

  Status ReadValue(uint64_t kv, std::string_view key, ValueType t, int depth, Value* out) {
    uint64_t at = pos_;
    if (t == ValueType::kString) {
      std::string_view s;
      TARMAC_RETURN_IF_ERROR(ReadString([&] { return KvField(kv, key, "string value"); }, &s));
      *out = Value::Str(std::string(s));
      return Status::Ok();
    }
    if (t != ValueType::kArray) {
      size_t n = ScalarSize(t);
      TARMAC_RETURN_IF_ERROR(
          Need([&] { return KvField(kv, key, fmt::format("{} value", ValueTypeName(t))); }, n));
      uint64_t bits = 0;
      std::memcpy(&bits, b_.data() + pos_, n);
      if (t == ValueType::kBool && bits > 1)
        return Err(KvField(kv, key, "bool value"), at, "bool byte is {}, must be 0 or 1", bits);
      pos_ += n;
      *out = Value::FromBits(t, bits);
      return Status::Ok();
    }
    // Array.
    if (depth >= kMaxArrayDepth)
      return Err(KvField(kv, key, "array"), at, "arrays nested more than {} deep",
                 kMaxArrayDepth);
    uint32_t elem_id = 0;
    TARMAC_RETURN_IF_ERROR(Read(KvField(kv, key, "array element type"), &elem_id));
    if (!IsValidValueType(elem_id))
      return Err(KvField(kv, key, "array element type"), at,
                 "unknown value type {} (valid: 0..12)", elem_id);
    auto elem = static_cast<ValueType>(elem_id);
    uint64_t count_at = pos_;
    uint64_t count = 0;
    TARMAC_RETURN_IF_ERROR(Read(KvField(kv, key, "array length"), &count));
    uint64_t min = MinEncodedSize(elem);
    if (count > left() / min)
      return Err(KvField(kv, key, "array length"), count_at,
                 "{} elements of type {} need at least {} bytes each, only {} bytes left", count,
                 ValueTypeName(elem), min, left());
    if (count > kMaxTotalArrayElements - total_array_elements_)
      return Err(KvField(kv, key, "array length"), count_at,
                 "{} more elements exceed the limit of {} array elements per file", count,
                 kMaxTotalArrayElements);
    total_array_elements_ += count;
    std::vector<Value> items;
    items.reserve(count);
    if (elem != ValueType::kString && elem != ValueType::kArray) {
      // Fast path: fixed-size scalars (vocab scores, token types).
      size_t n = ScalarSize(elem);
      for (uint64_t j = 0; j < count; ++j) {
        uint64_t bits = 0;
        std::memcpy(&bits, b_.data() + pos_, n);
        if (elem == ValueType::kBool && bits > 1)
          return Err(KvField(kv, key, fmt::format("array element {}", j)), pos_,
                     "bool byte is {}, must be 0 or 1", bits);
        pos_ += n;
        items.push_back(Value::FromBits(elem, bits));
      }
    } else {
      for (uint64_t j = 0; j < count; ++j) {
        Value item;
        TARMAC_RETURN_IF_ERROR(ReadValue(kv, key, elem, depth + 1, &item));
        items.push_back(std::move(item));
      }
    }
    *out = Value::Array(elem, std::move(items));
    return Status::Ok();
  }

  Status ParseAlignment() {
    for (size_t i = 0; i < f_->metadata_.size(); ++i) {
      const auto& kv = f_->metadata_[i];
      if (kv.key != "general.alignment") continue;
      std::string field = KvField(i, kv.key, "value");
      if (kv.value.type() != ValueType::kUint32)
        return DataLoss("gguf: {}: general.alignment must be uint32, found {}", field,
                        ValueTypeName(kv.value.type()));
      uint64_t a = kv.value.bits();
      if (!internal::IsPowerOfTwo(a))
        return DataLoss("gguf: {}: general.alignment is {}, must be a nonzero power of two",
                        field, a);
      f_->alignment_ = a;
    }
    return Status::Ok();
  }

  std::string TensorField(uint64_t i, std::string_view name, std::string_view what) const {
    return fmt::format("tensor {} '{}' {}", i, Printable(name), what);
  }

  Status ParseTensorInfos() {
    f_->tensors_.reserve(n_tensors_);
    info_at_.reserve(n_tensors_);
    std::unordered_set<std::string_view> seen;
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      uint64_t name_at = pos_;
      std::string_view name;
      TARMAC_RETURN_IF_ERROR(ReadString(fmt::format("tensor {} name", i), &name));
      if (name.empty()) return Err(fmt::format("tensor {} name", i), name_at, "empty name");
      if (name.size() > kMaxTensorNameBytes)
        return Err(TensorField(i, name, "name"), name_at, "name is {} bytes, at most {} allowed",
                   name.size(), kMaxTensorNameBytes);
      if (!IsValidUtf8(name))
        return Err(TensorField(i, name, "name"), name_at, "name is not valid UTF-8");
      if (!seen.insert(name).second)
        return Err(TensorField(i, name, "name"), name_at, "duplicate tensor name");
      TensorInfo t;
      t.name = std::string(name);
      uint64_t ndims_at = pos_;
      uint32_t n_dims = 0;
      TARMAC_RETURN_IF_ERROR(Read(TensorField(i, name, "n_dims"), &n_dims));
      if (n_dims < 1 || n_dims > kMaxDims)
        return Err(TensorField(i, name, "n_dims"), ndims_at, "n_dims is {}, must be 1..{}",
                   n_dims, kMaxDims);
      uint64_t dims_at = pos_;
      int64_t ne = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t dim = 0;
        TARMAC_RETURN_IF_ERROR(Read(TensorField(i, name, "dims"), &dim));
        if (dim == 0 || dim > static_cast<uint64_t>(INT64_MAX))
          return Err(TensorField(i, name, "dims"), dims_at,
                     "dim {} is {}, must be 1..INT64_MAX", d, static_cast<int64_t>(dim));
        if (__builtin_mul_overflow(ne, static_cast<int64_t>(dim), &ne))
          return Err(TensorField(i, name, "dims"), dims_at,
                     "element count overflows int64 at dim {}", d);
        t.dims.push_back(static_cast<int64_t>(dim));
      }
      uint64_t type_at = pos_;
      uint32_t type_id = 0;
      TARMAC_RETURN_IF_ERROR(Read(TensorField(i, name, "type"), &type_id));
      auto traits = GetDTypeTraits(type_id);
      if (!traits) {
        if (const char* removed = RemovedTypeName(type_id))
          return Err(TensorField(i, name, "type"), type_at,
                     "type {} ({}) was removed from the GGUF format; re-quantize the model",
                     type_id, removed);
        return Err(TensorField(i, name, "type"), type_at, "unknown ggml type {}", type_id);
      }
      t.type = static_cast<DType>(type_id);
      if (t.dims[0] % traits->block_size != 0)
        return Err(TensorField(i, name, "dims"), dims_at,
                   "row length {} is not a multiple of the {} block size {}", t.dims[0],
                   traits->name, traits->block_size);
      uint64_t blocks = static_cast<uint64_t>(ne / traits->block_size);
      if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(traits->type_size), &t.nbytes))
        return Err(TensorField(i, name, "dims"), dims_at, "byte size overflows 64 bits");
      uint64_t off_at = pos_;
      TARMAC_RETURN_IF_ERROR(Read(TensorField(i, name, "offset"), &t.offset));
      info_at_.push_back(off_at);
      f_->tensors_.push_back(std::move(t));
    }
    return Status::Ok();
  }

  Status PlaceTensors() {
    File& f = *f_;
    // pos_ <= file size and alignment <= 2^31, so this cannot overflow.
    uint64_t a = f.alignment_;
    f.data_offset_ = (pos_ + a - 1) / a * a;
    uint64_t data_size = f.data_offset_ <= b_.size() ? b_.size() - f.data_offset_ : 0;
    for (size_t i = 0; i < f.tensors_.size(); ++i) {
      TensorInfo& t = f.tensors_[i];
      std::string field = TensorField(i, t.name, "offset");
      if (t.offset % a != 0)
        return Err(field, info_at_[i], "offset {} is not a multiple of the alignment {}",
                   t.offset, a);
      if (f.data_offset_ > b_.size())
        return Err(field, info_at_[i], "the data section would start at {}, past the end of "
                   "the {}-byte file", f.data_offset_, b_.size());
      if (t.offset > data_size || t.nbytes > data_size - t.offset)
        return Err(field, info_at_[i],
                   "data [{}, +{}) lies outside the {}-byte data section (file truncated?)",
                   t.offset, t.nbytes, data_size);
      t.data = b_.data() + f.data_offset_ + t.offset;
      f.parameter_count_ += t.num_elements();  // each fits in the file, so the sum fits too
      f.tensor_bytes_ += t.nbytes;
    }
    std::vector<uint32_t> by_off(f.tensors_.size());
    for (uint32_t i = 0; i < by_off.size(); ++i) by_off[i] = i;
    std::sort(by_off.begin(), by_off.end(), [&](uint32_t x, uint32_t y) {
      return f.tensors_[x].offset < f.tensors_[y].offset;
    });
    for (size_t k = 1; k < by_off.size(); ++k) {
      const TensorInfo& p = f.tensors_[by_off[k - 1]];
      const TensorInfo& q = f.tensors_[by_off[k]];
      if (p.offset + p.nbytes > q.offset)
        return Err(TensorField(by_off[k], q.name, "offset"), info_at_[by_off[k]],
                   "data [{}, +{}) overlaps tensor {} '{}' at [{}, +{})", q.offset, q.nbytes,
                   by_off[k - 1], Printable(p.name), p.offset, p.nbytes);
    }
    return Status::Ok();
  }

  void BuildIndices() {
    File& f = *f_;
    f.metadata_by_key_.resize(f.metadata_.size());
    for (uint32_t i = 0; i < f.metadata_by_key_.size(); ++i) f.metadata_by_key_[i] = i;
    std::sort(f.metadata_by_key_.begin(), f.metadata_by_key_.end(),
              [&](uint32_t x, uint32_t y) { return f.metadata_[x].key < f.metadata_[y].key; });
    f.tensors_by_name_.resize(f.tensors_.size());
    for (uint32_t i = 0; i < f.tensors_by_name_.size(); ++i) f.tensors_by_name_[i] = i;
    std::sort(f.tensors_by_name_.begin(), f.tensors_by_name_.end(),
              [&](uint32_t x, uint32_t y) { return f.tensors_[x].name < f.tensors_[y].name; });
  }

  std::span<const uint8_t> b_;
  File* f_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t total_array_elements_ = 0;
  std::vector<uint64_t> info_at_;  // byte offset of each tensor's offset field
};

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t TensorInfo::num_rows() const {
  return dims.empty() || dims[0] == 0 ? 0 : num_elements() / dims[0];
}

Result<File> File::Parse(std::span<const uint8_t> bytes) {
  File f;
  f.bytes_ = bytes;
  Parser p(bytes, &f);
  TARMAC_RETURN_IF_ERROR(p.Run());
  return f;
}

Result<File> File::Open(const std::string& path) {
  auto map = MappedFile::Open(path);
  if (!map.ok()) return map.status();
  File f;
  f.map_ = std::move(map).value();
  f.path_ = path;
  f.bytes_ = f.map_.bytes();
  Parser p(f.bytes_, &f);
  Status st = p.Run();
  if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  return f;
}

const Value* File::Find(std::string_view key) const {
  auto it = std::lower_bound(
      metadata_by_key_.begin(), metadata_by_key_.end(), key,
      [&](uint32_t i, std::string_view k) { return std::string_view(metadata_[i].key) < k; });
  if (it == metadata_by_key_.end() || metadata_[*it].key != key) return nullptr;
  return &metadata_[*it].value;
}

const TensorInfo* File::FindTensor(std::string_view name) const {
  auto it = std::lower_bound(
      tensors_by_name_.begin(), tensors_by_name_.end(), name,
      [&](uint32_t i, std::string_view k) { return std::string_view(tensors_[i].name) < k; });
  if (it == tensors_by_name_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

namespace {

Status Missing(std::string_view key) {
  return NotFound("gguf: metadata key '{}' is missing", key);
}

Status WrongType(std::string_view key, std::string_view want, const Value& v) {
  std::string got = ValueTypeName(v.type());
  if (v.is_array()) got = fmt::format("array of {}", ValueTypeName(*v.array_type()));
  return InvalidArgument("gguf: metadata key '{}' must be {}, found {} {}", key, want, got,
                         v.ToString(4));
}

}  // namespace

Result<std::string> File::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  if (!v->AsString()) return WrongType(key, "a string", *v);
  return *v->AsString();
}

Result<uint64_t> File::GetUint(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  auto u = v->AsUint64();
  if (!u) return WrongType(key, "a non-negative integer", *v);
  return *u;
}

Result<int64_t> File::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  auto i = v->AsInt64();
  if (!i) return WrongType(key, "an integer fitting int64", *v);
  return *i;
}

Result<double> File::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  auto d = v->AsDouble();
  if (!d) return WrongType(key, "a float32 or float64", *v);
  return *d;
}

Result<bool> File::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  auto b = v->AsBool();
  if (!b) return WrongType(key, "a bool", *v);
  return *b;
}

Result<std::vector<std::string>> File::GetStringArray(std::string_view key) const {
  const Value* v = Find(key);
  if (!v) return Missing(key);
  if (!v->is_array() || *v->array_type() != ValueType::kString)
    return WrongType(key, "an array of strings", *v);
  std::vector<std::string> out;
  out.reserve(v->AsArray()->size());
  for (const Value& s : *v->AsArray()) out.push_back(*s.AsString());
  return out;
}

Result<uint64_t> File::GetUintOr(std::string_view key, uint64_t fallback) const {
  if (!Find(key)) return fallback;
  return GetUint(key);
}

Result<double> File::GetFloatOr(std::string_view key, double fallback) const {
  if (!Find(key)) return fallback;
  return GetFloat(key);
}

}  // namespace tarmac::gguf
