#include "grammar/stack_stepper.h"

namespace tarmac::grammar {
namespace {

constexpr size_t kLinearScan = 24;

uint64_t Key(int32_t state, int32_t parent) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(state)) << 32) | static_cast<uint32_t>(parent);
}

}  // namespace

void StackStepper::Begin(std::vector<StackNode>* pool, std::vector<StackNode>* out) {
  pool_ = pool;
  out_ = out;
  bottom_ = false;
  seen_.clear();
  seen_index_.clear();
}

bool StackStepper::Expand(std::vector<StackNode>* pool, int32_t state, int32_t parent, std::vector<StackNode>* out) {
  Begin(pool, out);
  Visit(state, parent, -1);
  return bottom_;
}

bool StackStepper::Step(std::vector<StackNode>* pool, std::span<const StackNode> tops, uint8_t b,
                        std::vector<StackNode>* out) {
  if (tops.size() == 1) {
    // One stack moving inside its rule (no call, cannot complete): no closure to run.
    const int32_t next = a_->Next(tops[0].state, b);
    if (next < 0) return false;
    const AutomatonState& st = a_->state(next);
    if (!st.final && st.calls_begin == st.calls_end) {
      out->push_back({next, tops[0].parent});
      return false;
    }
  }
  Begin(pool, out);
  for (const StackNode& top : tops) {
    const int32_t next = a_->Next(top.state, b);
    if (next >= 0) Visit(next, top.parent, -1);
  }
  return bottom_;
}

int32_t StackStepper::Find(int32_t state, int32_t parent) {
  if (seen_.size() < kLinearScan) {
    for (size_t i = 0; i < seen_.size(); ++i)
      if (seen_[i].state == state && seen_[i].parent == parent) return static_cast<int32_t>(i);
  } else {
    if (seen_index_.empty())
      for (size_t i = 0; i < seen_.size(); ++i) seen_index_.emplace(Key(seen_[i].state, seen_[i].parent), i);
    auto it = seen_index_.find(Key(state, parent));
    if (it != seen_index_.end()) return it->second;
  }
  const int32_t i = static_cast<int32_t>(seen_.size());
  seen_.push_back({state, parent, -1, false});
  if (!seen_index_.empty()) seen_index_.emplace(Key(state, parent), i);
  return i;
}

int32_t StackStepper::FrameOf(int32_t i) {
  if (seen_[i].node < 0) {
    const int32_t id = static_cast<int32_t>(pool_->size());
    const int32_t state = seen_[i].state, parent = seen_[i].parent;
    const int32_t resume = !a_->pass_through(state) ? id : parent < 0 ? -1 : (*pool_)[parent].resume;
    seen_[i].node = id;
    pool_->push_back({state, parent, resume});
  }
  return seen_[i].node;
}

// The closure: a state with byte edges is a top; each call pushes the callee above a frame
// that resumes at the call's target; a final state resumes the parent (or reaches the
// bottom). (state, parent) pairs are visited once per step, which also ends the cycles that
// nullable rules inside loops create. Completing resumes the parent in a loop, not by
// recursion, and skips frames that would only complete (StackNode::resume): a right-recursive
// grammar can end thousands of frames in one step. Calls recurse, but only as deep as rules
// can call each other before a byte (no left recursion).
void StackStepper::Visit(int32_t state, int32_t parent, int32_t existing) {
  while (true) {
    const int32_t i = Find(state, parent);
    if (seen_[i].expanded) return;
    seen_[i].expanded = true;
    if (existing >= 0 && seen_[i].node < 0) seen_[i].node = existing;
    const AutomatonState& st = a_->state(state);
    if (st.bytes_end > st.bytes_begin) out_->push_back({state, parent});
    for (const CallEdge& call : a_->calls(state)) {
      const int32_t frame = FrameOf(Find(call.target, parent));
      Visit(call.callee_start, frame, -1);
    }
    if (!st.final) return;
    const int32_t resume = parent < 0 ? -1 : (*pool_)[parent].resume;
    if (resume < 0) {
      bottom_ = true;
      return;
    }
    const StackNode p = (*pool_)[resume];
    existing = resume;
    state = p.state;
    parent = p.parent;
  }
}

}  // namespace tarmac::grammar
