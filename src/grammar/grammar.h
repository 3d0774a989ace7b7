// Grammar: a context-free grammar over Unicode text, as plain data. Every front end (GBNF,
// JSON Schema, regex, choice lists) compiles into it, and the automaton builder (automaton.h)
// turns it into per-rule byte automata for the matcher.
//
// A rule's body is an expression tree in the shape of GBNF: literals (UTF-8 bytes), character
// classes (codepoint ranges), references to rules, sequences, alternations and counted
// repetitions. Repetitions stay repetitions (they become loops in the rule's automaton, not
// helper rules), so `x*` costs no stack depth at match time.
//
// Grammar owns its rules and is mutated only while a front end builds it; afterwards it is
// read-only and safe to share. Not thread-safe to mutate concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tarmac::grammar {

// Inclusive range of Unicode codepoints.
struct CodepointRange {
  uint32_t lo;
  uint32_t hi;
  bool operator==(const CodepointRange&) const = default;
};

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

enum class ExprKind : uint8_t {
  kEmpty,      // matches ""
  kLiteral,    // text: the exact bytes (non-empty)
  kCharClass,  // one codepoint from ranges (sorted, disjoint, no surrogates, non-empty)
  kRuleRef,    // rule: index into Grammar::rules
  kSequence,   // items in order (>= 2 after the builders' flattening)
  kChoice,     // one of items (>= 2 after flattening)
  kRepeat,     // items[0] repeated min..max times (max == kUnbounded: no limit)
};

struct Expr {
  static constexpr int32_t kUnbounded = -1;

  ExprKind kind = ExprKind::kEmpty;
  std::string text;
  std::vector<CodepointRange> ranges;
  int32_t rule = -1;
  std::vector<Expr> items;
  int32_t min = 0;
  int32_t max = 0;

  bool operator==(const Expr&) const = default;
};

// Builders. They keep expressions in a normal form (nested sequences and choices flattened,
// adjacent literals merged, one-item sequences and choices unwrapped), so front ends can
// compose freely.
Expr Empty();
Expr Literal(std::string_view bytes);  // "" gives Empty()
// Normalises ranges (sorts, merges, drops surrogates, clamps to kMaxCodepoint); negated takes
// the complement over all codepoints. Preconditions: each range has lo <= hi. The result may
// be an empty class (matches nothing); front ends report that as an error.
Expr CharClass(std::vector<CodepointRange> ranges, bool negated = false);
Expr AnyChar();
Expr RuleRef(int32_t rule);
Expr Sequence(std::vector<Expr> items);
Expr Choice(std::vector<Expr> items);  // Preconditions: !items.empty()
// Preconditions: 0 <= min, and max == kUnbounded or min <= max.
Expr Repeat(Expr item, int32_t min, int32_t max);
inline Expr Optional(Expr e) { return Repeat(std::move(e), 0, 1); }
inline Expr Star(Expr e) { return Repeat(std::move(e), 0, Expr::kUnbounded); }
inline Expr Plus(Expr e) { return Repeat(std::move(e), 1, Expr::kUnbounded); }

// True if e can match the empty string without looking into rule references (a reference
// counts as non-empty; the automaton builder computes the exact answer).
bool TriviallyNullable(const Expr& e);

struct Rule {
  std::string name;  // for messages and GBNF output; unique within a grammar
  Expr body;
};

class Grammar {
 public:
  // Adds a rule with an empty body and returns its index. The name is made unique by
  // appending "-2", "-3", ... when taken.
  int32_t AddRule(std::string_view name);
  // Index of the rule named name, or -1.
  int32_t FindRule(std::string_view name) const;
  // Preconditions: 0 <= id < num_rules().
  void SetBody(int32_t id, Expr body);
  void SetRoot(int32_t id) { root_ = id; }

  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }
  const Rule& rule(int32_t id) const { return rules_[id]; }
  const std::vector<Rule>& rules() const { return rules_; }
  int32_t root() const { return root_; }

  // Every reference names an existing rule, the root is set, every class is non-empty,
  // every repetition is well-formed. Errors name the rule.
  Status Validate() const;

  // The grammar in GBNF syntax (root first), readable by ParseGbnf: for messages, tests and
  // debugging. Rule names are spelt with GBNF's name characters ([A-Za-z0-9_-]).
  std::string ToGbnf() const;

 private:
  std::vector<Rule> rules_;
  int32_t root_ = -1;
};

}  // namespace tarmac::grammar
