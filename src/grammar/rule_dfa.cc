#include "grammar/rule_dfa.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "base/hash.h"
#include "grammar/partition_refiner.h"

#include "grammar/utf8_ranges.h"

namespace tarmac::grammar {
namespace {

// Thompson NFA of one rule. Edges: a call when rule >= 0, an epsilon move when lo < 0, else
// the byte range lo..hi.
struct NfaEdge {
  int32_t from;
  int32_t to;
  int32_t rule;
  int16_t lo;
  int16_t hi;
};

class Nfa {
 public:
  Nfa(const Rule& rule, DfaBudget* budget) : rule_(rule), budget_(budget) {}

  Result<int32_t> NewState() {
    if (--budget_->nfa_left < 0)
      return ResourceExhausted("grammar: rule '{}' is too large (repetitions expand past the state limit)",
                               rule_.name);
    return num_states_++;
  }

  // Adds a path for e from start; returns its end state.
  Result<int32_t> Emit(const Expr& e, int32_t start) {
    switch (e.kind) {
      case ExprKind::kEmpty:
        return start;
      case ExprKind::kLiteral: {
        int32_t cur = start;
        for (unsigned char c : e.text) {
          TARMAC_ASSIGN_OR_RETURN(int32_t next, NewState());
          AddBytes(cur, c, c, next);
          cur = next;
        }
        return cur;
      }
      case ExprKind::kCharClass:
        return EmitClass(e, start);
      case ExprKind::kRuleRef: {
        TARMAC_ASSIGN_OR_RETURN(int32_t end, NewState());
        edges_.push_back({start, end, e.rule, -1, -1});
        return end;
      }
      case ExprKind::kSequence: {
        int32_t cur = start;
        for (const Expr& item : e.items) {
          TARMAC_ASSIGN_OR_RETURN(cur, Emit(item, cur));
        }
        return cur;
      }
      case ExprKind::kChoice: {
        TARMAC_ASSIGN_OR_RETURN(int32_t end, NewState());
        for (const Expr& item : e.items) {
          TARMAC_ASSIGN_OR_RETURN(int32_t branch, NewState());
          AddEpsilon(start, branch);
          TARMAC_ASSIGN_OR_RETURN(int32_t branch_end, Emit(item, branch));
          AddEpsilon(branch_end, end);
        }
        return end;
      }
      case ExprKind::kRepeat:
        return EmitRepeat(e, start);
    }
    return start;
  }

  // Sorts edges by source and indexes them.
  void Finish() {
    std::stable_sort(edges_.begin(), edges_.end(), [](const NfaEdge& a, const NfaEdge& b) { return a.from < b.from; });
    offsets_.assign(num_states_ + 1, 0);
    for (const NfaEdge& e : edges_) ++offsets_[e.from + 1];
    for (int32_t i = 0; i < num_states_; ++i) offsets_[i + 1] += offsets_[i];
  }

  int32_t num_states() const { return num_states_; }
  const NfaEdge* begin(int32_t s) const { return edges_.data() + offsets_[s]; }
  const NfaEdge* end(int32_t s) const { return edges_.data() + offsets_[s + 1]; }

 private:
  void AddEpsilon(int32_t from, int32_t to) { edges_.push_back({from, to, -1, -1, -1}); }
  void AddBytes(int32_t from, uint8_t lo, uint8_t hi, int32_t to) { edges_.push_back({from, to, -1, lo, hi}); }

  Result<int32_t> EmitClass(const Expr& e, int32_t start) {
    TARMAC_ASSIGN_OR_RETURN(int32_t end, NewState());
    std::vector<ByteRangeSeq> seqs;
    for (const CodepointRange& r : e.ranges) Utf8Sequences(r.lo, r.hi, &seqs);
    for (const ByteRangeSeq& seq : seqs) {
      int32_t cur = start;
      for (size_t i = 0; i + 1 < seq.size(); ++i) {
        TARMAC_ASSIGN_OR_RETURN(int32_t next, NewState());
        AddBytes(cur, seq[i].lo, seq[i].hi, next);
        cur = next;
      }
      AddBytes(cur, seq.back().lo, seq.back().hi, end);
    }
    return end;
  }

  Result<int32_t> EmitRepeat(const Expr& e, int32_t start) {
    const Expr& item = e.items[0];
    int32_t cur = start;
    for (int32_t i = 0; i < e.min; ++i) {
      TARMAC_ASSIGN_OR_RETURN(cur, Emit(item, cur));
    }
    if (e.max == Expr::kUnbounded) {
      TARMAC_ASSIGN_OR_RETURN(int32_t loop, NewState());
      AddEpsilon(cur, loop);
      TARMAC_ASSIGN_OR_RETURN(int32_t body_end, Emit(item, loop));
      AddEpsilon(body_end, loop);
      return loop;
    }
    TARMAC_ASSIGN_OR_RETURN(int32_t end, NewState());
    for (int32_t i = e.min; i < e.max; ++i) {
      AddEpsilon(cur, end);
      TARMAC_ASSIGN_OR_RETURN(cur, Emit(item, cur));
    }
    AddEpsilon(cur, end);
    return end;
  }

  const Rule& rule_;
  DfaBudget* budget_;
  int32_t num_states_ = 0;
  std::vector<NfaEdge> edges_;
  std::vector<int32_t> offsets_;
};

// Subset construction over bytes and called rules.
class Determinizer {
 public:
  Determinizer(const Nfa& nfa, int32_t nfa_end, const Rule& rule, DfaBudget* budget)
      : nfa_(nfa), end_(nfa_end), rule_(rule), budget_(budget), stamp_(nfa.num_states(), 0) {}

  Result<RuleDfa> Run(int32_t nfa_start) {
    RuleDfa dfa;
    TARMAC_ASSIGN_OR_RETURN(int32_t start, Intern(Closure({nfa_start})));
    (void)start;
    for (size_t d = 0; d < sets_.size(); ++d) {
      RuleDfaState st;
      const std::vector<int32_t> set = sets_[d];  // copy: Intern grows sets_
      st.final = std::binary_search(set.begin(), set.end(), end_);
      TARMAC_RETURN_IF_ERROR(ByteMoves(set, &st.bytes));
      TARMAC_RETURN_IF_ERROR(CallMoves(set, &st.calls));
      dfa.states.push_back(std::move(st));
    }
    return dfa;
  }

 private:
  std::vector<int32_t> Closure(std::vector<int32_t> seeds) {
    ++epoch_;
    std::vector<int32_t> out, stack;
    for (int32_t s : seeds) {
      if (stamp_[s] == epoch_) continue;
      stamp_[s] = epoch_;
      stack.push_back(s);
    }
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      out.push_back(s);
      for (const NfaEdge* e = nfa_.begin(s); e != nfa_.end(s); ++e) {
        if (e->rule >= 0 || e->lo >= 0 || stamp_[e->to] == epoch_) continue;
        stamp_[e->to] = epoch_;
        stack.push_back(e->to);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<int32_t> Intern(std::vector<int32_t> set) {
    auto it = ids_.find(set);
    if (it != ids_.end()) return it->second;
    if (--budget_->dfa_left < 0)
      return ResourceExhausted("grammar: rule '{}' is too large (its automaton passes the state limit)", rule_.name);
    const int32_t id = static_cast<int32_t>(sets_.size());
    ids_.emplace(set, id);
    sets_.push_back(std::move(set));
    return id;
  }

  Status ByteMoves(const std::vector<int32_t>& set, std::vector<ByteEdge>* out) {
    std::vector<const NfaEdge*> edges;
    std::vector<int> points;
    for (int32_t s : set) {
      for (const NfaEdge* e = nfa_.begin(s); e != nfa_.end(s); ++e) {
        if (e->rule >= 0 || e->lo < 0) continue;
        edges.push_back(e);
        points.push_back(e->lo);
        points.push_back(e->hi + 1);
      }
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    for (size_t i = 0; i + 1 < points.size(); ++i) {
      const int lo = points[i], hi = points[i + 1] - 1;
      std::vector<int32_t> targets;
      for (const NfaEdge* e : edges)
        if (e->lo <= lo && e->hi >= lo) targets.push_back(e->to);
      if (targets.empty()) continue;
      TARMAC_ASSIGN_OR_RETURN(int32_t id, Intern(Closure(std::move(targets))));
      if (!out->empty() && out->back().target == id && out->back().hi + 1 == lo) {
        out->back().hi = static_cast<uint8_t>(hi);
      } else {
        out->push_back({static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), id});
      }
    }
    return Status::Ok();
  }

  Status CallMoves(const std::vector<int32_t>& set, std::vector<CallEdge>* out) {
    std::map<int32_t, std::vector<int32_t>> by_rule;
    for (int32_t s : set)
      for (const NfaEdge* e = nfa_.begin(s); e != nfa_.end(s); ++e)
        if (e->rule >= 0) by_rule[e->rule].push_back(e->to);
    for (auto& [rule, targets] : by_rule) {
      TARMAC_ASSIGN_OR_RETURN(int32_t id, Intern(Closure(std::move(targets))));
      out->push_back({rule, -1, id});
    }
    return Status::Ok();
  }

  const Nfa& nfa_;
  int32_t end_;
  const Rule& rule_;
  DfaBudget* budget_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 0;
  struct SetHash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = v.size();
      for (int32_t x : v) h = SplitMix64(h ^ static_cast<uint32_t>(x));
      return h;
    }
  };
  std::unordered_map<std::vector<int32_t>, int32_t, SetHash> ids_;
  std::vector<std::vector<int32_t>> sets_;
};

// A state's signature: its class, its byte moves (adjacent ranges into one class merged)
// and calls with targets replaced by their classes.
void AppendSignature(const RuleDfaState& st, int32_t own, const std::vector<int32_t>& cls, std::vector<int64_t>* sig) {
  sig->push_back(own);
  int64_t prev_hi = -2, prev_cls = -1;
  for (const ByteEdge& e : st.bytes) {
    const int64_t c = cls[e.target];
    if (c == prev_cls && prev_hi + 1 == e.lo) {
      sig->back() = e.hi;  // extend the previous range
    } else {
      sig->insert(sig->end(), {c, e.lo, e.hi});
    }
    prev_hi = e.hi;
    prev_cls = c;
  }
  sig->push_back(-3);
  for (const CallEdge& e : st.calls) sig->insert(sig->end(), {e.rule, cls[e.target]});
}

}  // namespace

Result<RuleDfa> BuildRuleDfa(const Rule& rule, DfaBudget* budget) {
  Nfa nfa(rule, budget);
  TARMAC_ASSIGN_OR_RETURN(int32_t start, nfa.NewState());
  TARMAC_ASSIGN_OR_RETURN(int32_t end, nfa.Emit(rule.body, start));
  nfa.Finish();
  Determinizer det(nfa, end, rule, budget);
  return det.Run(start);
}

void MinimizeRuleDfa(RuleDfa* dfa, int max_rounds, int64_t max_work) {
  const size_t n = dfa->states.size();
  int64_t round_work = static_cast<int64_t>(n);
  for (const RuleDfaState& st : dfa->states) round_work += static_cast<int64_t>(st.bytes.size() + st.calls.size());
  max_rounds = static_cast<int>(std::min<int64_t>(max_rounds, max_work / std::max<int64_t>(1, round_work)));
  std::vector<int32_t> cls(n), next;
  for (size_t s = 0; s < n; ++s) cls[s] = dfa->states[s].final ? 1 : 0;
  size_t num_classes = 0;
  PartitionRefiner refiner;
  for (int round = 0;; ++round) {
    if (round > max_rounds) return;
    const size_t count = refiner.Round(
        static_cast<int32_t>(n),
        [&](int32_t s, std::vector<int64_t>* sig) { AppendSignature(dfa->states[s], cls[s], cls, sig); }, &next);
    const bool stable = count == num_classes;
    num_classes = count;
    cls.swap(next);
    if (stable) break;
  }
  if (num_classes == n) return;
  // Renumber so the start state's class is 0.
  std::vector<int32_t> order(num_classes, -1);
  int32_t next_id = 0;
  order[cls[0]] = next_id++;
  for (size_t s = 0; s < n; ++s)
    if (order[cls[s]] < 0) order[cls[s]] = next_id++;
  RuleDfa out;
  out.states.resize(num_classes);
  std::vector<bool> done(num_classes, false);
  for (size_t s = 0; s < n; ++s) {
    const int32_t c = order[cls[s]];
    if (done[c]) continue;
    done[c] = true;
    RuleDfaState st = dfa->states[s];
    std::vector<ByteEdge> bytes;
    for (ByteEdge e : st.bytes) {
      e.target = order[cls[e.target]];
      if (!bytes.empty() && bytes.back().target == e.target && bytes.back().hi + 1 == e.lo) {
        bytes.back().hi = e.hi;
      } else {
        bytes.push_back(e);
      }
    }
    st.bytes = std::move(bytes);
    for (CallEdge& e : st.calls) e.target = order[cls[e.target]];
    out.states[c] = std::move(st);
  }
  *dfa = std::move(out);
}

}  // namespace tarmac::grammar
