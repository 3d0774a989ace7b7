// Test helpers: a little-endian byte builder for hand-made (often malformed) GGUF files.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tarmac::gguf::testing {

class Bytes {
 public:
  Bytes& U8(uint8_t v) { return Put(v); }
  Bytes& U32(uint32_t v) { return Put(v); }
  Bytes& U64(uint64_t v) { return Put(v); }
  Bytes& Raw(std::string_view s) {
    b_.append(s);
    return *this;
  }
  // GGUF string: u64 length + bytes.
  Bytes& Str(std::string_view s) { return U64(s.size()).Raw(s); }
  Bytes& Magic() { return Raw("GGUF"); }
  Bytes& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return Magic().U32(version).U64(n_tensors).U64(n_kv);
  }
  // A key with a uint32 value (type 4).
  Bytes& KvU32(std::string_view key, uint32_t v) { return Str(key).U32(4).U32(v); }
  Bytes& KvStr(std::string_view key, std::string_view v) { return Str(key).U32(8).Str(v); }
  Bytes& Tensor(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) U64(d);
    return U32(type).U64(offset);
  }
  Bytes& PadTo(size_t alignment) {
    while (b_.size() % alignment) b_.push_back('\0');
    return *this;
  }
  Bytes& Zeros(size_t n) {
    b_.append(n, '\0');
    return *this;
  }
  size_t size() const { return b_.size(); }
  std::span<const uint8_t> span() const {
    return {reinterpret_cast<const uint8_t*>(b_.data()), b_.size()};
  }
  std::string& str() { return b_; }

 private:
  template <typename T>
  Bytes& Put(T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    b_.append(buf, sizeof(T));
    return *this;
  }
  std::string b_;
};

}  // namespace tarmac::gguf::testing
