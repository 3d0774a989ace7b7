#include "grammar/number_ranges.h"

#include <string>

namespace tarmac::grammar {
namespace {

Expr Digit() { return CharClass({{'0', '9'}}); }
Expr Digits(int32_t n) { return Repeat(Digit(), n, n); }

int NumDigits(uint64_t v) {
  int n = 1;
  while (v >= 10) v /= 10, ++n;
  return n;
}

uint64_t Pow10(int n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

// Decimal strings of equal length from lo to hi (lo <= hi), digit by digit.
Expr SameLength(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return Empty();
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return Sequence({Literal(lo.substr(0, 1)), SameLength(lo_rest, hi_rest)});
  const size_t rest = lo_rest.size();
  const bool lo_zeros = lo_rest == std::string(rest, '0');
  const bool hi_nines = hi_rest == std::string(rest, '9');
  std::vector<Expr> alts;
  if (!lo_zeros) alts.push_back(Sequence({Literal(lo.substr(0, 1)), SameLength(lo_rest, std::string(rest, '9'))}));
  const char first = lo_zeros ? lo[0] : static_cast<char>(lo[0] + 1);
  const char last = hi_nines ? hi[0] : static_cast<char>(hi[0] - 1);
  if (first <= last)
    alts.push_back(Sequence({CharClass({{static_cast<uint32_t>(first), static_cast<uint32_t>(last)}}),
                             Digits(static_cast<int32_t>(rest))}));
  if (!hi_nines) alts.push_back(Sequence({Literal(hi.substr(0, 1)), SameLength(std::string(rest, '0'), hi_rest)}));
  return Choice(std::move(alts));
}

// Unsigned integers in [a, b] (b absent: no upper bound) without leading zeros.
// Preconditions: a <= *b; values below 10^19.
Expr UnsignedRange(uint64_t a, std::optional<uint64_t> b) {
  std::vector<Expr> alts;
  const int da = NumDigits(a);
  const int db = b ? NumDigits(*b) : da;
  for (int len = da; len <= db; ++len) {
    const uint64_t lo = len == da ? a : Pow10(len - 1);
    const uint64_t hi = (b && len == db) ? *b : Pow10(len) - 1;
    alts.push_back(SameLength(std::to_string(lo), std::to_string(hi)));
  }
  if (!b) alts.push_back(Sequence({CharClass({{'1', '9'}}), Repeat(Digit(), da, Expr::kUnbounded)}));
  return Choice(std::move(alts));
}

uint64_t Magnitude(int64_t v) { return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v); }

Expr Fraction() { return Sequence({Literal("."), Plus(Digit())}); }

// Non-negative numbers M = I(.F)? with lo <= M <= hi (each bound possibly exclusive; hi
// absent: none), integer bounds.
std::optional<Expr> MagnitudeRange(uint64_t lo, bool lo_excl, std::optional<uint64_t> hi, bool hi_excl) {
  const Expr zero_fraction = Optional(Sequence({Literal("."), Plus(Literal("0"))}));
  if (hi && *hi < lo) return std::nullopt;
  if (hi && *hi == lo) {
    if (lo_excl || hi_excl) return std::nullopt;
    return Sequence({Literal(std::to_string(lo)), zero_fraction});
  }
  std::vector<Expr> alts;
  // I == lo: any fraction keeps M below lo + 1 <= hi; an exclusive lo needs a non-zero one.
  const Expr nonzero_fraction = Sequence({Literal("."), Star(Digit()), CharClass({{'1', '9'}}), Star(Digit())});
  alts.push_back(Sequence({Literal(std::to_string(lo)), lo_excl ? nonzero_fraction : Optional(Fraction())}));
  if (!hi) {
    alts.push_back(Sequence({UnsignedRange(lo + 1, std::nullopt), Optional(Fraction())}));
  } else {
    if (lo + 1 <= *hi - 1) alts.push_back(Sequence({UnsignedRange(lo + 1, *hi - 1), Optional(Fraction())}));
    if (!hi_excl) alts.push_back(Sequence({Literal(std::to_string(*hi)), zero_fraction}));
  }
  return Choice(std::move(alts));
}

}  // namespace

std::optional<Expr> IntegerInRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return std::nullopt;
  std::vector<Expr> alts;
  if (!lo || *lo < 0) {
    // Negatives: magnitudes from max(1, -hi) up to -lo.
    const uint64_t mag_lo = (hi && *hi < 0) ? Magnitude(*hi) : 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = Magnitude(*lo);
    alts.push_back(Sequence({Literal("-"), UnsignedRange(mag_lo, mag_hi)}));
  }
  if (!hi || *hi >= 0) {
    std::optional<uint64_t> top;
    if (hi) top = static_cast<uint64_t>(*hi);
    alts.push_back(UnsignedRange(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0, top));
  }
  return Choice(std::move(alts));
}

std::optional<Expr> NumberInRange(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<Expr> alts;
  // x >= 0.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    const bool lo_here = lo && lo->value >= 0;
    std::optional<uint64_t> top;
    if (hi) top = static_cast<uint64_t>(hi->value);
    auto m = MagnitudeRange(lo_here ? static_cast<uint64_t>(lo->value) : 0, lo_here && lo->exclusive, top,
                            hi && hi->exclusive);
    if (m) alts.push_back(std::move(*m));
  }
  // x <= 0, spelt "-" M with M = -x.
  if (!lo || lo->value < 0 || (lo->value == 0 && !lo->exclusive)) {
    const bool hi_here = hi && hi->value <= 0;
    std::optional<uint64_t> top;
    if (lo) top = Magnitude(lo->value);
    auto m = MagnitudeRange(hi_here ? Magnitude(hi->value) : 0, hi_here && hi->exclusive, top, lo && lo->exclusive);
    if (m) alts.push_back(Sequence({Literal("-"), std::move(*m)}));
  }
  if (alts.empty()) return std::nullopt;
  return Choice(std::move(alts));
}

}  // namespace tarmac::grammar
