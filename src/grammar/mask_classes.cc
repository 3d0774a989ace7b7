#include "grammar/mask_classes.h"

#include <map>

namespace tarmac::grammar {

std::vector<int32_t> MaskClasses(const Automaton& a, int32_t depth) {
  const int32_t n = a.num_states();
  std::vector<int32_t> cls(n);
  size_t num_classes = 0;
  {
    std::map<std::vector<int64_t>, int32_t> ids;
    for (int32_t s = 0; s < n; ++s) {
      const AutomatonState& st = a.state(s);
      std::vector<int64_t> key = {st.final, a.has_bytes(s), a.rule_called(st.rule)};
      cls[s] = ids.emplace(std::move(key), static_cast<int32_t>(ids.size())).first->second;
    }
    num_classes = ids.size();
  }
  for (int32_t round = 0; round < depth; ++round) {
    std::map<std::vector<int64_t>, int32_t> ids;
    std::vector<int32_t> next(n);
    std::vector<int64_t> sig;
    for (int32_t s = 0; s < n; ++s) {
      sig.clear();
      sig.push_back(cls[s]);
      int64_t prev_cls = -1, prev_hi = -2;
      for (const ByteEdge& e : a.byte_edges(s)) {
        const int64_t c = cls[e.target];
        if (c == prev_cls && prev_hi + 1 == e.lo) {
          sig.back() = e.hi;  // adjacent range into the same class: one range
        } else {
          sig.insert(sig.end(), {c, e.lo, e.hi});
        }
        prev_cls = c;
        prev_hi = e.hi;
      }
      sig.push_back(-1);
      for (const CallEdge& e : a.calls(s)) {
        sig.push_back(e.rule);
        sig.push_back(a.rule_nullable(e.rule) ? -2 - static_cast<int64_t>(e.target) : cls[e.target]);
      }
      next[s] = ids.emplace(sig, static_cast<int32_t>(ids.size())).first->second;
    }
    const bool stable = ids.size() == num_classes;
    num_classes = ids.size();
    cls = std::move(next);
    if (stable) break;
  }
  return cls;
}

}  // namespace tarmac::grammar
