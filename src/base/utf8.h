// UTF-8 helpers (validation, repair, streaming boundaries) and GPT-2's byte <-> printable
// codepoint mapping (byte-level BPE vocabularies spell bytes with it). Pure functions,
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tarmac {

// Length in bytes of the UTF-8 sequence that starts with lead byte `c` (1 for a stray
// continuation or invalid lead byte, so callers always make progress).
int Utf8SeqLen(uint8_t c);

// Appends the UTF-8 encoding of codepoint cp (cp < 0x110000) to out.
void AppendUtf8(uint32_t cp, std::string* out);

// True if s is entirely valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Number of bytes at the end of s that form an incomplete (but so far valid) UTF-8 sequence;
// 0 if s ends on a character boundary. Used by the streaming detokenizer to hold them back.
int IncompleteUtf8Suffix(std::string_view s);

// GPT-2 byte-level BPE represents each byte as a printable codepoint (so tokens contain no
// spaces or control characters): bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to themselves, the
// remaining 68 bytes to U+0100 onwards in byte order.
const std::string& ByteToUnicode(uint8_t b);  // UTF-8 of the mapped codepoint
// Inverse: returns -1 if `cp` is not the image of a byte.
int UnicodeToByte(uint32_t cp);

// s with every invalid UTF-8 sequence replaced by U+FFFD (text for a JSON response).
std::string SanitizeUtf8(std::string_view s);

// Decodes one codepoint at s[*pos], advancing *pos; invalid sequences yield U+FFFD and advance
// one byte.
uint32_t DecodeUtf8(std::string_view s, size_t* pos);

}  // namespace tarmac
