// Helpers shared by the GGUF reader and writer (not part of the public API).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tarmac::gguf::internal {

inline constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kWriteVersion = 3;

// Escapes a possibly hostile string for an error message: printable ASCII kept, the rest as
// \xNN, cut to max_bytes with "..." so a 1 MB key cannot flood a log line.
std::string Printable(std::string_view s, size_t max_bytes = 80);

inline bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// The host must be little-endian (checked at compile time in gguf_value.cc), so GGUF integers
// are read and written with memcpy.
template <typename T>
inline void AppendLE(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

}  // namespace tarmac::gguf::internal
