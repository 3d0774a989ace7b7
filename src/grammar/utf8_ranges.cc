#include "grammar/utf8_ranges.h"

#include <algorithm>

#include "base/check.h"

namespace tarmac::grammar {
namespace {

int EncodedLength(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Largest codepoint encoded with n bytes.
uint32_t MaxOfLength(int n) { return n == 1 ? 0x7F : n == 2 ? 0x7FF : n == 3 ? 0xFFFF : 0x10FFFF; }

int Encode(uint32_t cp, uint8_t* b) {
  const int n = EncodedLength(cp);
  if (n == 1) {
    b[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  for (int i = n - 1; i > 0; --i) {
    b[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  b[0] = static_cast<uint8_t>(kLead[n] | cp);
  return n;
}

// lo..hi share the encoded length. A range maps onto one sequence of byte ranges exactly when,
// at every continuation level, it covers whole blocks of 64^k codepoints (or stays inside one
// block); otherwise it is split at the block boundary and each half handled alone.
void Split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>* out) {
  const int n = EncodedLength(lo);
  for (int k = 1; k < n; ++k) {
    const uint32_t m = (1u << (6 * k)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;  // one block at this level
    if ((lo & m) != 0) {
      Split(lo, lo | m, out);
      Split((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      Split(lo, (hi & ~m) - 1, out);
      Split(hi & ~m, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  Encode(lo, a);
  Encode(hi, b);
  ByteRangeSeq seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out->push_back(std::move(seq));
}

}  // namespace

void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>* out) {
  TARMAC_DCHECK(lo <= hi && hi <= 0x10FFFF);
  TARMAC_DCHECK(hi < 0xD800 || lo > 0xDFFF);
  while (lo <= hi) {
    const uint32_t end = std::min(hi, MaxOfLength(EncodedLength(lo)));
    Split(lo, end, out);
    if (end == hi) break;
    lo = end + 1;
  }
}

}  // namespace tarmac::grammar
