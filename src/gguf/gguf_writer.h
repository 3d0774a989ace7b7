// Writer: builds a GGUF v3 file (little-endian) from metadata and tensors.
//
// The Writer owns its metadata (copies) but NOT tensor data passed as a span: that memory must
// stay valid until Write() returns. The streaming AddTensor form takes a fill callback that is
// called only during Write(), one tensor at a time, with a buffer of exactly nbytes to fill, so
// a large model never sits in memory twice. Tensor data offsets are multiples of the alignment
// (general.alignment, default 32); padding bytes are zero.
//
// Write() writes to "<path>.tmp.<pid>.<n>" in the same directory, fsyncs, then renames onto path,
// so a failed write (I/O error, a fill callback returning an error) never leaves a partial file
// at `path` (the temp file is removed).
//
// Not thread-safe: SetKV/AddTensor/SetAlignment mutate; Write() is const but calls the fill
// callbacks. Movable and copyable (fill callbacks are copied as std::function).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace tarmac::gguf {

class Writer {
 public:
  using FillFn = std::function<Status(std::span<uint8_t> out)>;

  // Sets key to value. If the key exists its value is replaced in place (order kept);
  // otherwise it is appended. Keys are validated in Write() (non-empty, UTF-8).
  void SetKV(std::string key, Value value);
  // Removes key; false if it was not set.
  bool RemoveKV(std::string_view key);
  const std::vector<KeyValue>& metadata() const { return metadata_; }

  // Sets general.alignment (uint32). InvalidArgument unless n is a nonzero power of two.
  // Also settable as SetKV("general.alignment", Value::U32(n)); Write() validates it.
  Status SetAlignment(uint32_t n);

  // Adds a tensor whose bytes are `data` (not copied: must outlive Write()). dims as GGUF
  // stores them (dims[0] innermost). InvalidArgument if: name empty, longer than 63 bytes,
  // not UTF-8 or already added; dims not 1..4 entries each >= 1; element count overflows;
  // dims[0] not a multiple of the block size; data.size() != computed nbytes.
  Status AddTensor(std::string name, std::vector<int64_t> dims, DType type,
                   std::span<const uint8_t> data);
  // Streaming form: `fill` is called once during Write() with a zeroed buffer of exactly the
  // tensor's nbytes; an error it returns aborts the Write() with that error.
  Status AddTensor(std::string name, std::vector<int64_t> dims, DType type, FillFn fill);

  size_t num_tensors() const { return tensors_.size(); }

  // Writes the file atomically (see above).
  Status Write(const std::string& path) const;
  // Serializes the whole file into memory (for tests, fuzz seeds, small files).
  Result<std::vector<uint8_t>> WriteToBuffer() const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> dims;
    DType type;
    uint64_t nbytes;
    std::span<const uint8_t> data;  // used when fill is empty
    FillFn fill;
  };
  Status CheckTensor(const std::string& name, const std::vector<int64_t>& dims, DType type,
                     uint64_t* nbytes) const;
  // Header + metadata + tensor infos + padding up to the data section; sets *alignment.
  Result<std::string> BuildHeader(uint64_t* alignment) const;
  // Streams the whole file through sink (called with consecutive chunks).
  Status Emit(const std::function<Status(std::span<const uint8_t>)>& sink) const;

  std::vector<KeyValue> metadata_;
  std::vector<PendingTensor> tensors_;
  std::unordered_set<std::string> tensor_names_;
};

}  // namespace tarmac::gguf
