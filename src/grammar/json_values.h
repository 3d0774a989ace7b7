// Grammar pieces for JSON text: whitespace, strings (with length bounds, escaped regexes and
// formats), numbers, literals of given values, and "any JSON value". The JSON Schema compiler
// (json_schema.h) assembles them; the tool-call grammars reuse them. Pure functions, except
// JsonValueRules, which adds rules to the grammar it is given (one per grammar being built,
// one thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"

namespace tarmac::grammar {

// Whitespace between JSON tokens: up to max_chars of space, tab, newline, carriage return
// (0: none; Expr::kUnbounded: any number).
Expr JsonWhitespace(int32_t max_chars);

// One character of a JSON string's content: an unescaped codepoint (not '"', '\\' or a control
// character) or an escape (\" \\ \/ \b \f \n \r \t, or \uXXXX outside the surrogates, so one
// escape is one character as validators count them).
Expr JsonStringChar();
// A whole JSON string "..." of min..max characters (max Expr::kUnbounded: no limit).
Expr JsonString(int32_t min_chars, int32_t max_chars);
// An expression over decoded text (codepoints) turned into its JSON string spelling: '"', '\\'
// and control characters become escapes. For regexes inside JSON strings.
Expr JsonEscaped(const Expr& text);
// The content (without quotes) of a string in one of the formats date, time, date-time,
// uuid, email, ipv4; an error for the others.
Result<Expr> JsonStringFormat(std::string_view format);

// -?(0|[1-9][0-9]*) and the full JSON number (fraction, exponent).
Expr JsonInteger();
Expr JsonNumber();

// The exact compact JSON text of value (as nlohmann::json dumps it).
Expr JsonLiteral(const nlohmann::ordered_json& value);

// Rules for any JSON value, added to g once and shared by every use: returns an expression
// (a choice of the object and array rules and inline scalars).
class JsonValueRules {
 public:
  JsonValueRules(Grammar* g, std::string prefix, int32_t max_whitespace)
      : g_(g), prefix_(std::move(prefix)), max_ws_(max_whitespace) {}
  Expr AnyValue();
  // The rule of any JSON object.
  int32_t ObjectRule();

 private:
  Grammar* g_;
  std::string prefix_;
  int32_t max_ws_;
  int32_t object_ = -1, array_ = -1;
};

}  // namespace tarmac::grammar
