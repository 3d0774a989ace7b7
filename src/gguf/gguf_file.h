// File: a parsed, fully validated GGUF file (versions 2 and 3, little-endian).
//
// Open() maps the file read-only and owns the mapping; tensor data is used in place (TensorInfo::
// data points into the mapping, valid as long as the File lives; moving a File keeps those
// pointers valid). Parse() reads a caller-owned byte span and owns nothing: the bytes must
// outlive the File.
//
// Every count, length, offset and size in the file is checked before use: a malformed file
// yields a DataLoss status whose message names the field and its byte offset, e.g.
//   gguf: kv 12 'tokenizer.ggml.tokens' array length at offset 1234: 4000000000 elements need
//   at least 32000000000 bytes, only 812 left
// and never a crash, an out-of-range read, or an allocation sized by an unchecked count.
//
// Rules enforced (where the format leaves a choice, the choice is stated):
//  - magic "GGUF"; version 2 or 3 (1 is rejected as unsupported; a byte-swapped version means a
//    big-endian file, rejected by name);
//  - keys: non-empty, valid UTF-8, unique; bools are 0 or 1 (anything else is rejected);
//    string values are kept as bytes (the spec says UTF-8, but vocabularies in the wild hold
//    byte fragments; the tokenizer judges them); arrays nest at most kMaxArrayDepth deep;
//  - general.alignment, if present: type uint32, nonzero power of two (default 32);
//  - tensors: name non-empty, valid UTF-8, at most kMaxTensorNameBytes (63, as ggml's
//    GGML_MAX_NAME=64 includes the terminator), unique; 1..4 dims; every dim >= 1 (a zero dim
//    is rejected: no real model has one and it makes an empty tensor whose offset is
//    meaningless); element count fits int64; dims[0] a multiple of the type's block size; type
//    id known (removed ids 4, 5, 31..33, 36..38 and ids after 39 are rejected); offset a
//    multiple of the alignment; data inside the file; no two tensors overlap.
//
// Immutable after construction; all const methods are safe to call from many threads.
// Movable, not copyable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_value.h"
#include "tensor/dtype.h"
#include "tensor/mapped_file.h"

namespace tarmac::gguf {

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;                 // GGML_MAX_DIMS
inline constexpr size_t kMaxTensorNameBytes = 63;  // GGML_MAX_NAME (64) minus the terminator
inline constexpr int kMaxArrayDepth = 8;           // nested arrays deeper than this are rejected
// Total array elements over all metadata: each costs ~48 bytes in memory however small it is
// in the file, so this bounds memory for a hostile file (real vocabularies use < 1M).
inline constexpr uint64_t kMaxTotalArrayElements = uint64_t{1} << 25;

struct TensorInfo {
  std::string name;
  // As GGUF stores them: dims[0] is the innermost (contiguous) dimension, i.e. the row length.
  std::vector<int64_t> dims;
  DType type = DType::kF32;
  uint64_t offset = 0;  // relative to the start of the data section; multiple of alignment
  uint64_t nbytes = 0;  // num_elements / block_size * type_size
  const uint8_t* data = nullptr;  // file bytes + data_offset + offset

  int64_t num_elements() const;
  // Number of rows = num_elements / dims[0].
  int64_t num_rows() const;
  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(nbytes)}; }
};

class File {
 public:
  File() = default;
  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Maps and parses `path`. IoError if it cannot be opened, DataLoss if malformed; messages
  // start with the path.
  static Result<File> Open(const std::string& path);
  // Parses bytes owned by the caller (they must outlive the File).
  static Result<File> Parse(std::span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Absolute byte offset of the data section (tensor offsets are relative to it).
  uint64_t data_offset() const { return data_offset_; }
  // The whole file.
  std::span<const uint8_t> bytes() const { return bytes_; }
  // Empty for Parse().
  const std::string& path() const { return path_; }

  // In file order.
  const std::vector<KeyValue>& metadata() const { return metadata_; }
  // nullptr if absent.
  const Value* Find(std::string_view key) const;
  // Typed getters: NotFound naming the key if absent, InvalidArgument naming the key, the
  // wanted and the actual type if the type does not fit.
  Result<std::string> GetString(std::string_view key) const;
  // Any integer type holding a value >= 0.
  Result<uint64_t> GetUint(std::string_view key) const;
  // Any integer type holding a value that fits int64.
  Result<int64_t> GetInt(std::string_view key) const;
  // float32 or float64.
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  // An array of strings.
  Result<std::vector<std::string>> GetStringArray(std::string_view key) const;
  // Like the getters above, but return `fallback` when the key is absent (still an error when
  // present with the wrong type).
  Result<uint64_t> GetUintOr(std::string_view key, uint64_t fallback) const;
  Result<double> GetFloatOr(std::string_view key, double fallback) const;

  // In file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr if absent.
  const TensorInfo* FindTensor(std::string_view name) const;
  // Sum of num_elements over all tensors.
  int64_t parameter_count() const { return parameter_count_; }
  // Sum of nbytes over all tensors.
  uint64_t tensor_bytes() const { return tensor_bytes_; }

 private:
  friend class Parser;

  MappedFile map_;
  std::string path_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::vector<uint32_t> metadata_by_key_;  // indices into metadata_, sorted by key
  std::vector<TensorInfo> tensors_;
  std::vector<uint32_t> tensors_by_name_;  // indices into tensors_, sorted by name
  int64_t parameter_count_ = 0;
  uint64_t tensor_bytes_ = 0;
};

}  // namespace tarmac::gguf
