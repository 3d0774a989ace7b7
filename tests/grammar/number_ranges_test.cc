#include "grammar/number_ranges.h"

#include <cmath>
#include <optional>

#include <gtest/gtest.h>

#include "grammar_test_util.h"

namespace tarmac::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> Root(const Expr& e) {
  Grammar g;
  const int32_t r = g.AddRule("root");
  g.SetBody(r, e);
  g.SetRoot(r);
  return testing::MustCompile(g, testing::ToyTable());
}

// Every integer in [-1300, 1300], spelt canonically, is accepted exactly when it lies in the
// range; leading zeros and "-0" never are.
TEST(GrammarNumberRangesTest, IntegersExhaustively) {
  const std::optional<int64_t> none;
  const std::pair<std::optional<int64_t>, std::optional<int64_t>> ranges[] = {
      {0, 0}, {0, 9}, {1, 10}, {7, 1234}, {-1234, -7}, {-15, 28}, {-999, 999}, {99, 100}, {100, 199},
      {37, none}, {none, -12}, {none, 250}, {-80, none}, {0, none}, {-1, -1}};
  for (const auto& [lo, hi] : ranges) {
    auto e = IntegerInRange(lo, hi);
    ASSERT_TRUE(e.has_value());
    auto g = Root(*e);
    for (int v = -1300; v <= 1300; ++v) {
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      EXPECT_EQ(testing::Matches(g, std::to_string(v)), in)
          << v << " in [" << (lo ? std::to_string(*lo) : "-inf") << ", " << (hi ? std::to_string(*hi) : "inf") << "]";
    }
    EXPECT_FALSE(testing::Matches(g, "007"));
    EXPECT_FALSE(testing::Matches(g, "-0"));
  }
  EXPECT_FALSE(IntegerInRange(5, 4).has_value());
}

TEST(GrammarNumberRangesTest, Int64Extremes) {
  auto g = Root(*IntegerInRange(INT64_MIN, INT64_MAX));
  EXPECT_TRUE(testing::Matches(g, "-9223372036854775808"));
  EXPECT_TRUE(testing::Matches(g, "9223372036854775807"));
  EXPECT_FALSE(testing::Matches(g, "9223372036854775808"));
  EXPECT_FALSE(testing::Matches(g, "-9223372036854775809"));
}

// Decimal numbers with up to two fraction digits around the bounds: accepted exactly when in
// range (by exact arithmetic in hundredths).
TEST(GrammarNumberRangesTest, NumbersAroundIntegerBounds) {
  struct Case {
    std::optional<NumberBound> lo, hi;
  };
  const Case cases[] = {{NumberBound{0, false}, NumberBound{1, false}}, {NumberBound{0, true}, NumberBound{1, true}},
                        {NumberBound{-2, false}, NumberBound{3, true}}, {NumberBound{-3, true}, std::nullopt},
                        {std::nullopt, NumberBound{-1, false}},         {NumberBound{2, false}, NumberBound{2, false}},
                        {std::nullopt, NumberBound{0, true}},           {NumberBound{0, true}, std::nullopt}};
  for (const Case& c : cases) {
    auto e = NumberInRange(c.lo, c.hi);
    ASSERT_TRUE(e.has_value());
    auto g = Root(*e);
    for (int h = -450; h <= 450; ++h) {  // h hundredths
      const bool in = (!c.lo || (c.lo->exclusive ? h > c.lo->value * 100 : h >= c.lo->value * 100)) &&
                      (!c.hi || (c.hi->exclusive ? h < c.hi->value * 100 : h <= c.hi->value * 100));
      const int a = std::abs(h);
      const std::string sign = h < 0 ? "-" : "";
      for (const std::string& text : {fmt::format("{}{}.{:02d}", sign, a / 100, a % 100),
                                      a % 100 == 0 ? fmt::format("{}{}", sign, a / 100) : std::string()}) {
        if (text.empty()) continue;
        EXPECT_EQ(testing::Matches(g, text), in) << text;
      }
    }
  }
  EXPECT_FALSE(NumberInRange(NumberBound{2, true}, NumberBound{2, false}).has_value());
  EXPECT_FALSE(NumberInRange(NumberBound{3, false}, NumberBound{2, false}).has_value());
}

}  // namespace
}  // namespace tarmac::grammar
