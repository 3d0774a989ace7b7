// GBNF (llama.cpp's grammar format, grammars/README.md there) into a Grammar.
//
// Supported: rules `name ::= alternatives`, names of letters, digits, '-' and '_'; string
// literals "..." and character classes [...] / [^...] with the escapes \n \r \t \\ \" \[ \]
// \- \xHH \uHHHH \UHHHHHHHH (all denote codepoints); '.' (any character); groups; '|'; the
// quantifiers ? * + {m} {m,} {m,n}; '#' comments. A newline ends a rule except inside
// parentheses or after '|'; as a small extension a line that starts with '|' continues the
// rule above. The start rule is `root`.
//
// Not supported (an error naming it): token matches (<[id]>, <token>, !<...>). Errors name
// the line and column. Pure function, thread-safe.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace tarmac::grammar {

Result<Grammar> ParseGbnf(std::string_view text);

}  // namespace tarmac::grammar
