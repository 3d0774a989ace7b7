// Regular expressions (ECMAScript syntax, the dialect JSON Schema's `pattern` names; the
// practical subset structured-output regexes use) as grammar expressions over codepoints.
//
// Supported: literals (UTF-8), '.', classes [...] / [^...] with ranges and escapes, the class
// escapes \d \D \w \W \s \S, the character escapes \t \n \r \f \v \0 \xHH \uHHHH \u{H...} \cX
// and escaped punctuation; groups (...), (?:...), (?<name>...); '|'; the quantifiers ? * +
// {n} {n,} {n,m}, each optionally lazy ('?' suffix: the same language). '^' at the very start
// and '$' at the very end are anchors; the match is always of the whole text.
//
// Not supported (an error naming the construct and its offset): backreferences, lookaround,
// word boundaries, Unicode property escapes, anchors elsewhere, possessive quantifiers.
// Pure functions, thread-safe.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace tarmac::grammar {

struct ParsedRegex {
  Expr expr;                   // matches the pattern's language (anchors removed)
  bool anchored_start = false;  // the pattern began with '^'
  bool anchored_end = false;    // the pattern ended with '$'
};

Result<ParsedRegex> ParseRegex(std::string_view pattern);

// A grammar whose root matches exactly the strings the pattern matches in full.
Result<Grammar> GrammarFromRegex(std::string_view pattern);

}  // namespace tarmac::grammar
