#include "grammar/automaton.h"

#include <algorithm>

#include "grammar/rule_dfa.h"

namespace tarmac::grammar {

// Build, step by step: per-rule automata, then the whole-grammar analyses that need every rule
// (which rules can complete, which are reachable, which can call themselves before a byte),
// then one global numbering of states.
class AutomatonBuilder {
 public:
  explicit AutomatonBuilder(const Grammar& g) : g_(g), n_(g.num_rules()) {}

  Result<Automaton> Build(const AutomatonLimits& limits) {
    TARMAC_RETURN_IF_ERROR(g_.Validate());
    DfaBudget budget{limits.max_nfa_states, limits.max_dfa_states};
    for (const Rule& rule : g_.rules()) {
      TARMAC_ASSIGN_OR_RETURN(RuleDfa dfa, BuildRuleDfa(rule, &budget));
      dfas_.push_back(std::move(dfa));
    }
    ComputeProductive();
    if (!productive_[g_.root()])
      return InvalidArgument("grammar: rule '{}' can never complete, so the grammar matches nothing",
                             g_.rule(g_.root()).name);
    for (RuleDfa& dfa : dfas_) {
      PruneDeadStates(&dfa);
      MinimizeRuleDfa(&dfa);
    }
    ComputeReachable();
    ComputeNullable();
    TARMAC_RETURN_IF_ERROR(CheckLeftRecursion());
    return Globalize();
  }

 private:
  // productive_[r]: rule r can complete (its start reaches a final state through bytes and
  // calls of productive rules).
  void ComputeProductive() {
    productive_.assign(n_, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (int32_t r = 0; r < n_; ++r) {
        if (productive_[r] || !ReachesFinal(dfas_[r], [&](int32_t callee) { return productive_[callee]; }, true))
          continue;
        productive_[r] = true;
        changed = true;
      }
    }
  }

  // Whether the start reaches a final state, following call edges whose rule passes
  // `can_call`, and byte edges when follow_bytes.
  template <typename CanCall>
  static bool ReachesFinal(const RuleDfa& dfa, CanCall can_call, bool follow_bytes) {
    std::vector<bool> seen(dfa.states.size(), false);
    std::vector<int32_t> stack = {0};
    seen[0] = true;
    while (!stack.empty()) {
      const RuleDfaState& st = dfa.states[stack.back()];
      stack.pop_back();
      if (st.final) return true;
      auto visit = [&](int32_t t) {
        if (!seen[t]) {
          seen[t] = true;
          stack.push_back(t);
        }
      };
      if (follow_bytes)
        for (const ByteEdge& e : st.bytes) visit(e.target);
      for (const CallEdge& e : st.calls)
        if (can_call(e.rule)) visit(e.target);
    }
    return false;
  }

  // Drops moves into states that cannot complete the rule and calls of rules that cannot
  // complete, then the states the start no longer reaches. A matcher thus never enters a
  // configuration with no way to finish.
  void PruneDeadStates(RuleDfa* dfa) const {
    const size_t n = dfa->states.size();
    std::vector<std::vector<int32_t>> preds(n);
    for (size_t s = 0; s < n; ++s) {
      for (const ByteEdge& e : dfa->states[s].bytes) preds[e.target].push_back(static_cast<int32_t>(s));
      for (const CallEdge& e : dfa->states[s].calls)
        if (productive_[e.rule]) preds[e.target].push_back(static_cast<int32_t>(s));
    }
    std::vector<bool> live(n, false);
    std::vector<int32_t> stack;
    for (size_t s = 0; s < n; ++s) {
      if (dfa->states[s].final) {
        live[s] = true;
        stack.push_back(static_cast<int32_t>(s));
      }
    }
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      for (int32_t p : preds[s]) {
        if (!live[p]) {
          live[p] = true;
          stack.push_back(p);
        }
      }
    }
    for (RuleDfaState& st : dfa->states) {
      std::erase_if(st.bytes, [&](const ByteEdge& e) { return !live[e.target]; });
      std::erase_if(st.calls, [&](const CallEdge& e) { return !live[e.target] || !productive_[e.rule]; });
    }
    CompactReachable(dfa);
  }

  static void CompactReachable(RuleDfa* dfa) {
    const size_t n = dfa->states.size();
    std::vector<int32_t> id(n, -1), order = {0};
    id[0] = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      const RuleDfaState& st = dfa->states[order[i]];
      auto visit = [&](int32_t t) {
        if (id[t] < 0) {
          id[t] = static_cast<int32_t>(order.size());
          order.push_back(t);
        }
      };
      for (const ByteEdge& e : st.bytes) visit(e.target);
      for (const CallEdge& e : st.calls) visit(e.target);
    }
    if (order.size() == n) return;
    RuleDfa out;
    for (int32_t old : order) {
      RuleDfaState st = std::move(dfa->states[old]);
      for (ByteEdge& e : st.bytes) e.target = id[e.target];
      for (CallEdge& e : st.calls) e.target = id[e.target];
      out.states.push_back(std::move(st));
    }
    *dfa = std::move(out);
  }

  void ComputeReachable() {
    reachable_.assign(n_, false);
    std::vector<int32_t> stack = {g_.root()};
    reachable_[g_.root()] = true;
    while (!stack.empty()) {
      const int32_t r = stack.back();
      stack.pop_back();
      for (const RuleDfaState& st : dfas_[r].states) {
        for (const CallEdge& e : st.calls) {
          if (!reachable_[e.rule]) {
            reachable_[e.rule] = true;
            stack.push_back(e.rule);
          }
        }
      }
    }
  }

  // nullable_[r]: rule r can complete without consuming a byte.
  void ComputeNullable() {
    nullable_.assign(n_, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (int32_t r = 0; r < n_; ++r) {
        if (!reachable_[r] || nullable_[r] ||
            !ReachesFinal(dfas_[r], [&](int32_t callee) { return nullable_[callee]; }, false))
          continue;
        nullable_[r] = true;
        changed = true;
      }
    }
  }

  // A rule is left-recursive when it can call itself, directly or through other rules,
  // before consuming a byte. Edges of the "calls before a byte" graph: from each state the
  // start reaches through calls of nullable rules only.
  Status CheckLeftRecursion() const {
    const std::vector<bool>& nullable = nullable_;
    std::vector<std::vector<int32_t>> first_calls(n_);
    for (int32_t r = 0; r < n_; ++r) {
      if (!reachable_[r]) continue;
      const RuleDfa& dfa = dfas_[r];
      std::vector<bool> seen(dfa.states.size(), false);
      std::vector<int32_t> stack = {0};
      seen[0] = true;
      while (!stack.empty()) {
        const RuleDfaState& st = dfa.states[stack.back()];
        stack.pop_back();
        for (const CallEdge& e : st.calls) {
          first_calls[r].push_back(e.rule);
          if (nullable[e.rule] && !seen[e.target]) {
            seen[e.target] = true;
            stack.push_back(e.target);
          }
        }
      }
    }
    // Depth-first search for a cycle; colour 1 = on the current path.
    std::vector<int> colour(n_, 0);
    std::vector<int32_t> path;
    for (int32_t r = 0; r < n_; ++r) {
      if (colour[r] != 0 || !reachable_[r]) continue;
      if (int32_t hit = FindCycle(r, first_calls, &colour, &path); hit >= 0) {
        std::string cycle;
        auto from = std::find(path.begin(), path.end(), hit);
        for (auto it = from; it != path.end(); ++it) cycle += g_.rule(*it).name + " -> ";
        cycle += g_.rule(hit).name;
        return InvalidArgument("grammar: rule '{}' is left-recursive ({})", g_.rule(hit).name, cycle);
      }
    }
    return Status::Ok();
  }

  static int32_t FindCycle(int32_t r, const std::vector<std::vector<int32_t>>& edges, std::vector<int>* colour,
                           std::vector<int32_t>* path) {
    (*colour)[r] = 1;
    path->push_back(r);
    for (int32_t c : edges[r]) {
      if ((*colour)[c] == 1) return c;
      if ((*colour)[c] == 0) {
        if (int32_t hit = FindCycle(c, edges, colour, path); hit >= 0) return hit;
      }
    }
    (*colour)[r] = 2;
    path->pop_back();
    return -1;
  }

  Automaton Globalize() const {
    Automaton a;
    a.root_rule_ = g_.root();
    a.rule_start_.assign(n_, -1);
    a.rule_called_.assign(n_, false);
    a.rule_nullable_ = nullable_;
    for (int32_t r = 0; r < n_; ++r) a.rule_names_.push_back(g_.rule(r).name);
    int32_t next = 0;
    for (int32_t r = 0; r < n_; ++r) {
      if (!reachable_[r]) continue;
      a.rule_start_[r] = next;
      next += static_cast<int32_t>(dfas_[r].states.size());
    }
    for (int32_t r = 0; r < n_; ++r) {
      if (!reachable_[r]) continue;
      const int32_t base = a.rule_start_[r];
      for (const RuleDfaState& st : dfas_[r].states) {
        AutomatonState out;
        out.rule = r;
        out.final = st.final;
        out.bytes_begin = static_cast<uint32_t>(a.byte_edges_.size());
        for (ByteEdge e : st.bytes) {
          e.target += base;
          a.byte_edges_.push_back(e);
        }
        out.bytes_end = static_cast<uint32_t>(a.byte_edges_.size());
        out.calls_begin = static_cast<uint32_t>(a.calls_.size());
        for (CallEdge e : st.calls) {
          a.calls_.push_back({e.rule, a.rule_start_[e.rule], e.target + base});
          a.rule_called_[e.rule] = true;
        }
        out.calls_end = static_cast<uint32_t>(a.calls_.size());
        a.states_.push_back(out);
      }
    }
    return a;
  }

  const Grammar& g_;
  const int32_t n_;
  std::vector<RuleDfa> dfas_;
  std::vector<bool> productive_;
  std::vector<bool> reachable_;
  std::vector<bool> nullable_;
};

Result<Automaton> Automaton::Build(const Grammar& grammar, const AutomatonLimits& limits) {
  return AutomatonBuilder(grammar).Build(limits);
}

}  // namespace tarmac::grammar
