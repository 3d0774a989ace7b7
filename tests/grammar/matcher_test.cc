#include "grammar/matcher.h"

#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar_test_util.h"

namespace tarmac::grammar {
namespace {

using testing::BruteForceMask;
using testing::MustCompile;
using testing::ToyTable;

std::shared_ptr<const CompiledGrammar> FromGbnf(const std::string& text, std::shared_ptr<const TokenTable> t) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  return MustCompile(*g, std::move(t));
}

bool Matches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text) && m.CanEnd();
}

bool IsPrefix(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text);
}

// Random walks; at every state the fast mask equals the brute-force one, and a rollback of
// the last k tokens brings back the very masks seen before them.
void CheckMasksAndRollback(const std::shared_ptr<const CompiledGrammar>& g, int walks, int max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g);
    std::vector<TokenBitmask> seen;
    TokenBitmask mask;
    for (int step = 0; step < max_len; ++step) {
      m.FillNextTokenMask(&mask);
      TokenBitmask brute = BruteForceMask(m);
      ASSERT_EQ(mask.AllowedIds(), brute.AllowedIds()) << "walk " << w << " step " << step;
      seen.push_back(mask);
      std::vector<int32_t> allowed = mask.AllowedIds();
      std::erase_if(allowed, [&](int32_t id) { return g->tokens().is_eog(id); });
      if (allowed.empty()) break;
      ASSERT_TRUE(m.AcceptToken(allowed[rng() % allowed.size()]));
    }
    const int32_t k = std::min<int32_t>(m.num_accepted(), 1 + static_cast<int32_t>(rng() % 5));
    m.Rollback(k);
    m.FillNextTokenMask(&mask);
    EXPECT_EQ(mask.AllowedIds(), seen[m.num_accepted()].AllowedIds()) << "after rolling back " << k;
  }
}

TEST(GrammarMatcherTest, LiteralsClassesAndRepetitions) {
  auto g = FromGbnf(R"(root ::= "a" [0-9]{2,3} ("x" | "yz")* "!")", ToyTable());
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "a12!"));
  EXPECT_TRUE(Matches(g, "a123xyzx!"));
  EXPECT_FALSE(Matches(g, "a1!"));
  EXPECT_FALSE(Matches(g, "a1234!"));
  EXPECT_FALSE(Matches(g, "a12y!"));
  EXPECT_TRUE(IsPrefix(g, "a12y"));
  EXPECT_FALSE(IsPrefix(g, "b"));
}

TEST(GrammarMatcherTest, RecursionAndNullableRules) {
  auto g = FromGbnf(R"(
root ::= list
list ::= "[" ws (item (ws "," ws item)*)? ws "]"
item ::= list | [a-z]+ | opt
opt ::= "<" ws ">"
ws ::= [ ]*
)",
                    ToyTable());
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "[]"));
  EXPECT_TRUE(Matches(g, "[ [a, [b,c]] , <> , [[]] ]"));
  EXPECT_FALSE(Matches(g, "[a,]"));
  EXPECT_FALSE(Matches(g, "[[a]"));
  CheckMasksAndRollback(g, 20, 30, 1);
}

TEST(GrammarMatcherTest, Utf8ClassesAcrossTokens) {
  auto g = FromGbnf(R"(root ::= [à-ÿ日-本]+ "." )", ToyTable());
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "é日本."));
  EXPECT_FALSE(Matches(g, "e."));
  GrammarMatcher m(g);
  // "é" split over two byte tokens: the first is a valid prefix, the second completes it.
  const TokenTable& t = g->tokens();
  int32_t c3 = -1, a9 = -1;
  for (int32_t id = 0; id < t.n_vocab(); ++id) {
    if (t.bytes(id) == "\xC3") c3 = id;
    if (t.bytes(id) == "\xA9") a9 = id;
  }
  ASSERT_TRUE(m.AcceptToken(c3));
  EXPECT_FALSE(m.CanEnd());
  TokenBitmask mask;
  m.FillNextTokenMask(&mask);
  EXPECT_TRUE(mask.Test(a9));
  ASSERT_TRUE(m.AcceptToken(a9));
  CheckMasksAndRollback(g, 20, 12, 2);
}

TEST(GrammarMatcherTest, EndOfGenerationOnlyWhereTheGrammarEnds) {
  auto g = FromGbnf(R"(root ::= "ab" "c"?)", ToyTable());
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  TokenBitmask mask;
  m.FillNextTokenMask(&mask);
  EXPECT_FALSE(mask.Test(0));
  EXPECT_FALSE(m.AcceptToken(0));
  ASSERT_TRUE(m.AcceptBytes("ab"));
  m.FillNextTokenMask(&mask);
  EXPECT_TRUE(mask.Test(0));
  ASSERT_TRUE(m.AcceptToken(0));
  EXPECT_TRUE(m.IsTerminated());
  m.FillNextTokenMask(&mask);
  EXPECT_EQ(mask.Count(), 0);
  m.Rollback(1);
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.AcceptBytes("c"));
  EXPECT_FALSE(m.CanContinue());
}

TEST(GrammarMatcherTest, MaskAppliesToLogitsIncludingPaddedRows) {
  TokenBitmask mask(130);
  for (int32_t id : {0, 63, 64, 65, 127, 129}) mask.Set(id);
  std::vector<float> logits(200, 1.0f);
  mask.ApplyToLogits(logits);
  for (int32_t i = 0; i < 200; ++i) EXPECT_EQ(logits[i] == 1.0f, i < 130 && mask.Test(i)) << i;
  TokenBitmask all(128);
  for (int32_t i = 0; i < 128; ++i) all.Set(i);
  std::vector<float> keep(128, 2.0f);
  all.ApplyToLogits(keep);
  EXPECT_EQ(keep, std::vector<float>(128, 2.0f));
}

TEST(GrammarMatcherTest, RefusedTokenLeavesStateUnchanged) {
  auto g = FromGbnf(R"(root ::= "abc" | "ab" "x")", ToyTable());
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes("a"));
  EXPECT_FALSE(m.AcceptBytes("bz"));
  EXPECT_EQ(m.num_accepted(), 1);
  EXPECT_TRUE(m.AcceptBytes("bc"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(GrammarMatcherTest, MasksMatchBruteForceOnJsonLikeGrammar) {
  auto g = FromGbnf(R"(
root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)*)? ws "}"
array ::= "[" ws (value (ws "," ws value)*)? ws "]"
string ::= "\"" ([^"\\] | "\\" ["\\nu])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws ::= [ \n]{0,3}
)",
                    ToyTable());
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "{\"a\": [1, -2.5e+3, true, {\"b\":null}], \"c\": \"x\\n\"}"));
  CheckMasksAndRollback(g, 40, 40, 3);
}

TEST(GrammarMatcherTest, LongRightRecursionStaysLinear) {
  // Each "x" leaves a frame that completes at once when the input ends; the closure must not
  // walk all of them on every byte (nor recurse once per frame).
  auto g = FromGbnf("root ::= \"x\" root? | \"y\"", ToyTable());
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g);
  const std::string xs(200000, 'x');
  ASSERT_TRUE(m.AcceptBytes(xs));
  EXPECT_TRUE(m.CanEnd());
  ASSERT_TRUE(m.AcceptBytes("xy"));
  EXPECT_TRUE(m.CanEnd());
  CheckMasksAndRollback(g, 10, 20, 4);
  auto nested = FromGbnf("root ::= \"(\" root? \")\"", ToyTable());
  ASSERT_NE(nested, nullptr);
  GrammarMatcher n(nested);
  ASSERT_TRUE(n.AcceptBytes(std::string(50000, '(') + std::string(50000, ')')));
  EXPECT_TRUE(n.CanEnd());
}

TEST(GrammarMatcherTest, OneCompiledGrammarServesMatchersOnManyThreads) {
  auto g = FromGbnf(R"(root ::= "[" ([a-z]+ ("," [a-z]+)*)? "]")", ToyTable());
  ASSERT_NE(g, nullptr);
  std::vector<std::thread> threads;
  std::vector<int> done(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int w = 0; w < 200; ++w) {
        GrammarMatcher m(g);
        testing::WalkOptions opts;
        opts.max_tokens = 60;
        if (testing::RandomWalk(&m, &rng, opts)) ++done[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int d : done) EXPECT_GT(d, 100);
}

TEST(GrammarMatcherTest, LeftRecursionIsRefused) {
  auto g = ParseGbnf("root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"");
  ASSERT_TRUE(g.ok());
  auto c = CompiledGrammar::Compile(*g, ToyTable());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("left-recursive"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("a -> a"), std::string::npos) << c.status().message();
}

TEST(GrammarMatcherTest, GrammarThatMatchesNothingIsRefused) {
  auto g = ParseGbnf("root ::= \"a\" root");
  ASSERT_TRUE(g.ok());
  auto c = CompiledGrammar::Compile(*g, ToyTable());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("never complete"), std::string::npos) << c.status().message();
}

TEST(GrammarMatcherTest, DeadBranchesArePruned) {
  // "b" leads only into a rule that cannot complete: it must not be allowed at all.
  auto g = FromGbnf("root ::= \"a\" | \"b\" never\nnever ::= \"c\" never", ToyTable());
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(IsPrefix(g, "b"));
  EXPECT_TRUE(Matches(g, "a"));
}

}  // namespace
}  // namespace tarmac::grammar
