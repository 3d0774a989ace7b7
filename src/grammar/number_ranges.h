// Decimal integers and numbers within bounds, as grammar expressions in JSON's number syntax
// (no leading zeros; '-' for negatives; "-0" allowed where 0 is). Bounded ranges are regular
// languages: digit-by-digit alternations, as the `minimum`/`maximum` of JSON Schema need.
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/grammar.h"

namespace tarmac::grammar {

// Integers in [lo, hi] (either side open when absent). nullopt: no integer qualifies.
std::optional<Expr> IntegerInRange(std::optional<int64_t> lo, std::optional<int64_t> hi);

struct NumberBound {
  int64_t value;
  bool exclusive;
};

// JSON numbers (integer part, optional fraction, no exponent) between integer bounds.
// nullopt: no number qualifies.
std::optional<Expr> NumberInRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace tarmac::grammar
