#include "grammar/mask_classes.h"

#include "grammar/partition_refiner.h"

namespace tarmac::grammar {

std::vector<int32_t> MaskClasses(const Automaton& a, int32_t depth) {
  const int32_t n = a.num_states();
  std::vector<int32_t> cls, next;
  PartitionRefiner refiner;
  int32_t num_classes = refiner.Round(
      n,
      [&](int32_t s, std::vector<int64_t>* sig) {
        const AutomatonState& st = a.state(s);
        sig->insert(sig->end(), {st.final, a.has_bytes(s), static_cast<int64_t>(a.rule_called(st.rule))});
      },
      &cls);
  for (int32_t round = 0; round < depth; ++round) {
    const int32_t count = refiner.Round(
        n,
        [&](int32_t s, std::vector<int64_t>* sig) {
          sig->push_back(cls[s]);
          int64_t prev_cls = -1, prev_hi = -2;
          for (const ByteEdge& e : a.byte_edges(s)) {
            const int64_t c = cls[e.target];
            if (c == prev_cls && prev_hi + 1 == e.lo) {
              sig->back() = e.hi;  // adjacent range into the same class: one range
            } else {
              sig->insert(sig->end(), {c, e.lo, e.hi});
            }
            prev_cls = c;
            prev_hi = e.hi;
          }
          sig->push_back(-1);
          for (const CallEdge& e : a.calls(s)) {
            sig->push_back(e.rule);
            sig->push_back(a.rule_nullable(e.rule) ? -2 - static_cast<int64_t>(e.target) : cls[e.target]);
          }
        },
        &next);
    const bool stable = count == num_classes;
    num_classes = count;
    cls.swap(next);
    if (stable) break;
  }
  return cls;
}

}  // namespace tarmac::grammar
