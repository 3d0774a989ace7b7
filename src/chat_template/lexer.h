// Lexer: template source -> tokens, with Jinja2's whitespace rules as Hugging Face configures
// them (trim_blocks and lstrip_blocks on, keep_trailing_newline off).
//
// Owns nothing beyond the returned tokens. Pure function, thread-safe.
// The source is first normalised like Jinja2 does: \r\n and \r become \n and one trailing
// newline is dropped. Text between tags becomes kText tokens (whitespace control already
// applied); each {{ ... }} becomes kVarBegin, expression tokens, kVarEnd; each {% ... %} becomes
// kBlockBegin, tokens, kBlockEnd; comments vanish; {% raw %} bodies become kText.
// Errors (unterminated tags or strings, unexpected characters, unbalanced brackets) throw
// TemplateError with the line and column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tarmac::chat_template {

enum class TokKind : uint8_t {
  kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof
};

struct Token {
  TokKind kind = TokKind::kEof;
  std::string text;  // text, name, operator, or the decoded string literal
  int64_t ival = 0;
  double fval = 0;
  int line = 0;
  int column = 0;
};

// Jinja2's newline normalisation (see above). Exposed for tests.
std::string NormalizeSource(std::string_view source);

// Preconditions: none (any bytes). Throws TemplateError on malformed input, including invalid
// UTF-8.
std::vector<Token> Lex(std::string_view source);

const char* TokKindName(TokKind k);

}  // namespace tarmac::chat_template
