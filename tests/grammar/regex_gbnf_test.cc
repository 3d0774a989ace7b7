#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/regex_parser.h"
#include "grammar/rule_dfa.h"
#include "grammar_test_util.h"

namespace tarmac::grammar {
namespace {

using testing::Matches;
using testing::ToyTable;

std::shared_ptr<const CompiledGrammar> Regex(const std::string& pattern) {
  auto g = GrammarFromRegex(pattern);
  EXPECT_TRUE(g.ok()) << pattern << ": " << g.status().ToString();
  return g.ok() ? testing::MustCompile(*g, ToyTable()) : nullptr;
}

std::shared_ptr<const CompiledGrammar> Gbnf(const std::string& text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? testing::MustCompile(*g, ToyTable()) : nullptr;
}

struct RegexCase {
  const char* pattern;
  std::vector<const char*> match;
  std::vector<const char*> no_match;
};

TEST(GrammarRegexTest, PracticalSubset) {
  const RegexCase cases[] = {
      {"abc", {"abc"}, {"ab", "abcd", ""}},
      {"^a|b$", {"a", "b"}, {"ab", ""}},
      {"a(b|cd)*e", {"ae", "abe", "acdbcde"}, {"ace", "abd"}},
      {"(?:ab)+", {"ab", "abab"}, {"", "aba"}},
      {"(?<year>[0-9]{4})-(?<m>[0-9]{2})", {"2024-05"}, {"24-05"}},
      {"x{2}y{1,}z{0,2}", {"xxy", "xxyyyzz"}, {"xy", "xxyzzz"}},
      {"a{,3}", {"a{,3}"}, {"a"}},
      {"[^a-c]", {"d", "é", "\n"}, {"a", "b", "dd"}},
      {"[a\\-z]", {"a", "-", "z"}, {"b"}},
      {"[]a]", {"]", "a"}, {"b"}},
      {"\\d+\\.\\d*", {"3.", "12.50"}, {".5", "a.1"}},
      {"\\w\\W\\s\\S", {"a! x"}, {"ab x", "a!xx"}},
      {".", {"a", "日"}, {"\n", "ab"}},
      {"\\x41\\u00e9\\u{65e5}", {"Aé日"}, {"Ae日"}},
      {"\\uD83D\\uDE00", {"\xF0\x9F\x98\x80"}, {"a"}},
      {"a+?b*?c??", {"a", "aabbc"}, {"c"}},
      {"\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$\\\\\\/", {".*+?()[]{}|^$\\/"}, {}},
      {"[\\d\\s]+", {"1 2"}, {"a"}},
      {"[\\b]", {"\b"}, {"b"}},
      {"colou?r", {"color", "colour"}, {"colouur"}},
  };
  for (const RegexCase& c : cases) {
    auto g = Regex(c.pattern);
    ASSERT_NE(g, nullptr) << c.pattern;
    for (const char* m : c.match) EXPECT_TRUE(Matches(g, m)) << c.pattern << " should match '" << m << "'";
    for (const char* m : c.no_match) EXPECT_FALSE(Matches(g, m)) << c.pattern << " should not match '" << m << "'";
  }
}

TEST(GrammarRegexTest, ControlEscapes) {
  auto g = Regex("\\t\\n\\r\\f\\v\\0\\cJ");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, std::string_view("\t\n\r\f\v\0\n", 7)));
}

TEST(GrammarRegexTest, AnchorsAreReported) {
  auto re = ParseRegex("^ab$");
  ASSERT_TRUE(re.ok());
  EXPECT_TRUE(re->anchored_start && re->anchored_end);
  auto loose = ParseRegex("ab\\$");
  ASSERT_TRUE(loose.ok());
  EXPECT_FALSE(loose->anchored_start || loose->anchored_end);
}

TEST(GrammarRegexTest, UnsupportedConstructsAreErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "backreferences"},
      {"(?=a)", "lookaround"},
      {"(?!a)", "lookaround"},
      {"(?<=a)b", "lookaround"},
      {"\\bword", "word boundaries"},
      {"\\p{L}", "Unicode property escapes"},
      {"a^b", "anchor '^'"},
      {"a$b", "anchor '$'"},
      {"a++", "possessive"},
      {"*a", "nothing to repeat"},
      {"(ab", "missing ')'"},
      {"ab)", "unbalanced ')'"},
      {"[ab", "unterminated character class"},
      {"[z-a]", "reversed"},
      {"a{3,2}", "max < min"},
      {"a{20000}", "above 10000"},
      {"\\q", "unknown escape"},
      {"\\uD800", "unpaired surrogate"},
      {"\\", "lone '\\'"},
  };
  for (const auto& [pattern, expected] : cases) {
    auto re = ParseRegex(pattern);
    ASSERT_FALSE(re.ok()) << pattern;
    EXPECT_NE(re.status().message().find(expected), std::string::npos) << pattern << ": " << re.status().message();
  }
}

TEST(GrammarGbnfTest, LlamaCppSyntax) {
  auto g = Gbnf(R"(
# a comment
root ::= (
    # inside parentheses newlines are spaces
    "1. " move " " move "\n"
    ([1-9] [0-9]? ". " move " " move "\n")+
)
move ::= (pawn | nonpawn | castle) [+#]?
pawn ::= [a-h] [1-8]
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" ("-O")?
)");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "1. e4 e5\n2. Nf3 Nc6\n3. O-O-O Qxd8#\n"));
  EXPECT_FALSE(Matches(g, "1. e9 e5\n2. a1 a2\n"));
}

TEST(GrammarGbnfTest, EscapesClassesAndRepetitions) {
  auto g = Gbnf(R"(root ::= "\x41\u00e9\"\\" [\[\]\-] [^\n]{2} x{1,2} "|" y{2,} z{3}
x ::= "x" | "X"
y ::= [0-9]
z ::= "\U0001F600")");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "Aé\"\\-abxX|123\U0001F600\U0001F600\U0001F600"));
  EXPECT_FALSE(Matches(g, "Aé\"\\-abxX|1\U0001F600\U0001F600\U0001F600"));
}

TEST(GrammarGbnfTest, AlternativesContinueAfterBar) {
  auto g = Gbnf("root ::= \"a\" |\n  \"b\"\n  | \"c\"\n");
  ASSERT_NE(g, nullptr);
  for (const char* s : {"a", "b", "c"}) EXPECT_TRUE(Matches(g, s)) << s;
}

TEST(GrammarGbnfTest, ErrorsNameLineAndColumn) {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= foo", "line 1: rule 'foo' is used but never defined"},
      {"rot ::= \"a\"", "no 'root' rule"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 9: rule 'root' is defined twice"},
      {"root ::= \"a", "unterminated string literal"},
      {"root ::= [a", "unterminated character class"},
      {"root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'"},
      {"root ::= <think>", "token matches ('<...>', '!<...>') are not supported"},
      {"root ::= ( \"a\"", "expected ')'"},
      {"root = \"a\"", "expected '::='"},
      {"root ::= \"a\"{3,1}", "max < min"},
      {"root ::= [z-a]", "reversed"},
      {"root ::= \"a\" )", "unexpected ')'"},
  };
  for (const auto& [text, expected] : cases) {
    auto g = ParseGbnf(text);
    ASSERT_FALSE(g.ok()) << text;
    EXPECT_NE(g.status().message().find(expected), std::string::npos) << text << ": " << g.status().message();
  }
}

TEST(GrammarRegexTest, NestingIsBounded) {
  const std::string deep = std::string(300, '(') + "a" + std::string(300, ')');
  auto re = ParseRegex(deep);
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.status().message().find("nested deeper than 256"), std::string::npos) << re.status().message();
  auto g = ParseGbnf("root ::= " + deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested deeper than 256"), std::string::npos) << g.status().message();
  EXPECT_TRUE(ParseRegex(std::string(200, '(') + "a" + std::string(200, ')')).ok());
}

// Found by fuzz/grammar_fuzz (a timeout): a long chain such as ".{0,10000}x" never stabilises
// in 256 refinement rounds, and those rounds over its 250k states cost seconds while the
// request waited. Minimisation now also stops at a work bound and leaves the DFA as it is
// (still correct, only larger).
TEST(GrammarRegexTest, MinimisationStopsAtItsWorkBound) {
  auto dfa = [] {  // 0 -a-> 1, 0 -b-> 2; 1 and 2 final and alike
    RuleDfa d;
    d.states.resize(3);
    d.states[0].bytes = {ByteEdge{'a', 'a', 1}, ByteEdge{'b', 'b', 2}};
    d.states[1].final = d.states[2].final = true;
    return d;
  };
  RuleDfa minimised = dfa();
  MinimizeRuleDfa(&minimised);
  EXPECT_EQ(minimised.states.size(), 2u);
  RuleDfa bounded = dfa();
  MinimizeRuleDfa(&bounded, 256, /*max_work=*/1);
  EXPECT_EQ(bounded.states.size(), 3u);
  // A chain left unminimised still matches exactly its language.
  auto g = Regex(".{0,300}x");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(Matches(g, "x"));
  EXPECT_TRUE(Matches(g, std::string(300, 'a') + "x"));
  EXPECT_TRUE(Matches(g, std::string(299, 'x') + "x"));
  EXPECT_FALSE(Matches(g, std::string(301, 'a') + "x"));
  EXPECT_FALSE(Matches(g, std::string(300, 'a')));
}

TEST(GrammarGbnfTest, PrintedGrammarParsesBack) {
  const std::string text = R"(root ::= item ("," item)* | "[" [^\]\n]* "]"
item ::= [a-z\u00e0-\u00ff]+ "\t"? | "\"" . "\"")";
  auto g = ParseGbnf(text);
  ASSERT_TRUE(g.ok());
  auto again = ParseGbnf(g->ToGbnf());
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << g->ToGbnf();
  EXPECT_EQ(again->ToGbnf(), g->ToGbnf());
}

}  // namespace
}  // namespace tarmac::grammar
