// One rule's body as a deterministic automaton over bytes and rule calls: the per-rule step of
// Automaton::Build (automaton.h). Internal to the grammar module.
//
// BuildRuleDfa runs Thompson's construction (an NFA with epsilon moves; character classes
// become UTF-8 byte-range paths; repetitions become copies and loops) and the subset
// construction, treating each called rule as one more input symbol. MinimizeRuleDfa merges
// equivalent states by partition refinement. Pure functions over their arguments.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "grammar/automaton.h"
#include "grammar/grammar.h"

namespace tarmac::grammar {

// Targets are indices into RuleDfa::states; CallEdge::callee_start is unused (-1) here.
struct RuleDfaState {
  bool final = false;
  std::vector<ByteEdge> bytes;  // sorted by lo, disjoint, adjacent equal targets merged
  std::vector<CallEdge> calls;  // sorted by rule, one per rule
};

struct RuleDfa {
  std::vector<RuleDfaState> states;  // states[0] is the start
};

// Counts NFA and DFA states against the limits across calls (one budget per grammar).
struct DfaBudget {
  int64_t nfa_left;
  int64_t dfa_left;
};

// Errors name the rule when the budget runs out.
Result<RuleDfa> BuildRuleDfa(const Rule& rule, DfaBudget* budget);

// Merges equivalent states (same finality, same moves into equivalent states). Leaves dfa as
// it is when refinement would take more than max_rounds rounds, or more than max_work state
// and edge visits in all (each round visits every state and edge once): a request's grammar
// is compiled while the server waits, and a long chain that never stabilises (".{0,10000}x":
// 250k states) otherwise cost 256 full rounds, seconds, for nothing.
inline constexpr int64_t kMinimizeMaxWork = int64_t{1} << 24;
void MinimizeRuleDfa(RuleDfa* dfa, int max_rounds = 256, int64_t max_work = kMinimizeMaxWork);

}  // namespace tarmac::grammar
