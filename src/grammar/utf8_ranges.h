// Codepoint ranges as UTF-8 byte-range sequences: how a character class becomes paths of a
// byte automaton. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace tarmac::grammar {

struct ByteRange {
  uint8_t lo;
  uint8_t hi;
  bool operator==(const ByteRange&) const = default;
};

// A sequence of 1-4 byte ranges: the bytes b0 in [r0], b1 in [r1], ... spell exactly the
// codepoints of one slice of the input range.
using ByteRangeSeq = std::vector<ByteRange>;

// Appends to out byte-range sequences whose union spells exactly the codepoints lo..hi in
// UTF-8 (no overlong forms). Preconditions: lo <= hi <= 0x10FFFF and the range holds no
// surrogates (U+D800-U+DFFF).
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>* out);

}  // namespace tarmac::grammar
