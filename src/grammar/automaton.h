// Automaton: a grammar compiled into one deterministic byte automaton per rule, joined by call
// edges: a pushdown automaton over UTF-8 bytes.
//
// A state belongs to one rule and has byte edges (disjoint ranges, sorted), call edges ("run
// rule R from its start; when R completes, continue at target") and a final flag (the rule
// may complete here). Build determinises and minimises each rule's automaton, removes states
// that can never complete and rules nothing reaches, and refuses left recursion (a rule that
// can reach itself before consuming a byte): with it the matcher's stack closure would not
// terminate.
//
// Immutable after Build; safe to share between threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace tarmac::grammar {

struct ByteEdge {
  uint8_t lo;
  uint8_t hi;
  int32_t target;
};

struct CallEdge {
  int32_t rule;
  int32_t callee_start;  // the callee's start state
  int32_t target;        // where the caller continues after the callee completes
};

struct AutomatonState {
  int32_t rule = -1;
  bool final = false;
  uint32_t bytes_begin = 0, bytes_end = 0;
  uint32_t calls_begin = 0, calls_end = 0;
};

struct AutomatonLimits {
  int64_t max_nfa_states = 4'000'000;  // over all rules, before determinising
  int64_t max_dfa_states = 400'000;    // over all rules
};

class Automaton {
 public:
  // Errors name the rule: left recursion (with its cycle), a grammar that matches nothing, a
  // size limit exceeded.
  static Result<Automaton> Build(const Grammar& grammar, const AutomatonLimits& limits = {});

  int32_t num_states() const { return static_cast<int32_t>(states_.size()); }
  const AutomatonState& state(int32_t s) const { return states_[s]; }
  std::span<const ByteEdge> byte_edges(int32_t s) const {
    return {byte_edges_.data() + states_[s].bytes_begin, states_[s].bytes_end - states_[s].bytes_begin};
  }
  std::span<const CallEdge> calls(int32_t s) const {
    return {calls_.data() + states_[s].calls_begin, states_[s].calls_end - states_[s].calls_begin};
  }
  bool has_bytes(int32_t s) const { return states_[s].bytes_end > states_[s].bytes_begin; }
  // Neither final nor calling: a stack entering s needs no closure.
  bool plain(int32_t s) const { return !states_[s].final && states_[s].calls_end == states_[s].calls_begin; }
  // Final with no moves: a stack resuming at s completes at once.
  bool pass_through(int32_t s) const {
    const AutomatonState& st = states_[s];
    return st.final && st.bytes_end == st.bytes_begin && st.calls_end == st.calls_begin;
  }

  // The state reached from s on byte b, or -1.
  int32_t Next(int32_t s, uint8_t b) const {
    const AutomatonState& st = states_[s];
    for (uint32_t i = st.bytes_begin; i < st.bytes_end; ++i) {
      const ByteEdge& e = byte_edges_[i];
      if (b < e.lo) return -1;
      if (b <= e.hi) return e.target;
    }
    return -1;
  }

  int32_t num_rules() const { return static_cast<int32_t>(rule_names_.size()); }
  int32_t root_rule() const { return root_rule_; }
  int32_t root_start() const { return rule_start_[root_rule_]; }
  int32_t rule_start(int32_t rule) const { return rule_start_[rule]; }
  const std::string& rule_name(int32_t rule) const { return rule_names_[rule]; }
  // False when no call edge enters the rule: completing it means the whole input is complete.
  bool rule_called(int32_t rule) const { return rule_called_[rule]; }
  // The rule can complete without consuming a byte.
  bool rule_nullable(int32_t rule) const { return rule_nullable_[rule]; }

 private:
  friend class AutomatonBuilder;
  std::vector<AutomatonState> states_;
  std::vector<ByteEdge> byte_edges_;
  std::vector<CallEdge> calls_;
  std::vector<int32_t> rule_start_;  // -1 for rules dropped as unreachable
  std::vector<std::string> rule_names_;
  std::vector<bool> rule_called_;
  std::vector<bool> rule_nullable_;
  int32_t root_rule_ = -1;
};

}  // namespace tarmac::grammar
