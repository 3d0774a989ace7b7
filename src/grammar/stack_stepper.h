// The stacks of a pushdown run over an Automaton, and one byte step over a set of them.
//
// Stacks are kept as a tree in a node pool: a node is (state, parent), parent being the node
// that resumes when the node's rule completes (-1: the bottom). A run's configuration is a set
// of tops, each a (state, parent) pair whose state has byte edges ("a stack that can consume
// a byte"); stacks that would only call or complete are expanded at once (the closure). Only
// frames below a call become pool nodes. Nodes are never modified, so a configuration stays
// valid as long as the pool is not truncated below it: rollback and trial walks append nodes
// and truncate back.
//
// StackStepper holds scratch space only; one per thread. The pool is the caller's.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"

namespace tarmac::grammar {

struct StackNode {
  int32_t state;
  int32_t parent;  // -1: the bottom
  // Pool nodes only: the node a completed callee really resumes at, skipping frames that
  // would complete at once and do nothing else (right recursion piles them up); -1: the bottom.
  int32_t resume = -1;
};

class StackStepper {
 public:
  explicit StackStepper(const Automaton* automaton) : a_(automaton) {}

  // Appends to *out the tops reachable from (state, parent) without consuming a byte.
  // Returns whether the bottom rule can complete there (a stack popped past the bottom).
  bool Expand(std::vector<StackNode>* pool, int32_t state, int32_t parent, std::vector<StackNode>* out);

  // Consumes byte b on every stack of tops; appends the resulting tops to *out (duplicates
  // merged). Returns whether, after b, the bottom rule can complete.
  bool Step(std::vector<StackNode>* pool, std::span<const StackNode> tops, uint8_t b, std::vector<StackNode>* out);

 private:
  struct Seen {
    int32_t state;
    int32_t parent;
    int32_t node;  // pool node of this pair as a frame, -1 until one is needed
    bool expanded;
  };

  void Begin(std::vector<StackNode>* pool, std::vector<StackNode>* out);
  int32_t Find(int32_t state, int32_t parent);
  int32_t FrameOf(int32_t seen_index);
  void Visit(int32_t state, int32_t parent, int32_t existing);

  const Automaton* a_;
  std::vector<StackNode>* pool_ = nullptr;
  std::vector<StackNode>* out_ = nullptr;
  bool bottom_ = false;
  std::vector<Seen> seen_;
  std::unordered_map<uint64_t, int32_t> seen_index_;  // used once seen_ outgrows a linear scan
};

}  // namespace tarmac::grammar
