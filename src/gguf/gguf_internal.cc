#include "gguf/gguf_internal.h"

#include <fmt/format.h>

namespace tarmac::gguf::internal {

std::string Printable(std::string_view s, size_t max_bytes) {
  std::string out;
  size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (n < s.size()) out += "...";
  return out;
}

}  // namespace tarmac::gguf::internal
