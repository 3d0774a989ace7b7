#include "base/utf8.h"

#include <array>

namespace tarmac {

int Utf8SeqLen(uint8_t c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {
// Returns the sequence length if s[pos..] starts a valid UTF-8 character, 0 if invalid,
// -1 if it is a valid but truncated prefix.
int ValidSeqAt(std::string_view s, size_t pos) {
  const auto c = static_cast<uint8_t>(s[pos]);
  if (c < 0x80) return 1;
  int len;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  for (int i = 1; i < len; ++i) {
    if (pos + i >= s.size()) return -1;
    const auto cc = static_cast<uint8_t>(s[pos + i]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
    // Reject overlongs and out-of-range as early as the second byte allows.
    if (i == 1) {
      if (len == 3 && c == 0xE0 && cc < 0xA0) return 0;
      if (len == 3 && c == 0xED && cc >= 0xA0) return 0;  // surrogates
      if (len == 4 && c == 0xF0 && cc < 0x90) return 0;
      if (len == 4 && c == 0xF4 && cc >= 0x90) return 0;
    }
  }
  return len;
}
}  // namespace

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    int n = ValidSeqAt(s, i);
    if (n <= 0) return false;
    i += n;
  }
  return true;
}

int IncompleteUtf8Suffix(std::string_view s) {
  // A truncated character is at most 3 bytes long; look back that far for its lead byte.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<uint8_t>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    return ValidSeqAt(s, n - back) == -1 ? static_cast<int>(back) : 0;
  }
  return 0;
}

uint32_t DecodeUtf8(std::string_view s, size_t* pos) {
  int n = ValidSeqAt(s, *pos);
  if (n <= 0) {
    ++*pos;
    return 0xFFFD;
  }
  const auto c = static_cast<uint8_t>(s[*pos]);
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[*pos + i]) & 0x3F);
  *pos += n;
  return cp;
}

std::string SanitizeUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  for (size_t p = 0; p < s.size();) AppendUtf8(DecodeUtf8(s, &p), &out);
  return out;
}

namespace {
struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::array<int, 512> from_cp;  // codepoints used are < 0x144
  ByteMap() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      AppendUtf8(cp, &to_unicode[b]);
      from_cp[cp] = b;
    }
  }
};
const ByteMap& Map() {
  static const ByteMap m;
  return m;
}
}  // namespace

const std::string& ByteToUnicode(uint8_t b) { return Map().to_unicode[b]; }

int UnicodeToByte(uint32_t cp) { return cp < 512 ? Map().from_cp[cp] : -1; }

}  // namespace tarmac
