// GrammarMatcher: one request's position in a compiled grammar. Advances per token, tells
// whether the output so far is a valid prefix and whether it may end here, fills the mask of
// tokens allowed next, and rolls back accepted tokens (speculative decoding verifies several
// proposed tokens and keeps a prefix of them).
//
// The state is a set of stacks (stack_stepper.h) over the grammar's automaton; every accepted
// token appends one entry to a history of configurations, so Rollback(n) is a truncation
// and restores exactly the masks seen before. End-of-generation tokens are allowed exactly
// when the grammar can end; control tokens never are. After an end-of-generation token is
// accepted the matcher is terminated and allows nothing until rolled back.
//
// Owns its history and scratch; shares the CompiledGrammar (immutable). Not thread-safe: one
// matcher per request, used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/stack_stepper.h"
#include "grammar/token_bitmask.h"
#include "grammar/token_walker.h"

namespace tarmac::grammar {

class GrammarMatcher {
 public:
  // Preconditions: grammar != nullptr.
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Accepts token id if the grammar allows it next (one history entry); otherwise returns
  // false and changes nothing. Ids outside the vocabulary are refused.
  bool AcceptToken(int32_t id);
  // Accepts raw bytes as one history entry (forced text, tests). All or nothing.
  bool AcceptBytes(std::string_view bytes);

  // Fills mask (resized to the vocabulary) with the tokens AcceptToken would accept now.
  void FillNextTokenMask(TokenBitmask* mask);

  // The output so far is a complete sentence of the grammar (end-of-generation allowed).
  bool CanEnd() const { return steps_.back().can_end; }
  // Some text token could still follow (false: the grammar is complete and closed).
  bool CanContinue() const { return steps_.back().tops_end > steps_.back().tops_begin; }
  bool IsTerminated() const { return steps_.back().terminated; }

  // Number of entries accepted since construction or Reset (tokens and AcceptBytes calls).
  int32_t num_accepted() const { return static_cast<int32_t>(steps_.size()) - 1; }
  // Undoes the last n accepted entries. Preconditions: 0 <= n <= num_accepted().
  void Rollback(int32_t n);
  void Reset() { Rollback(num_accepted()); }

  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct Step {
    uint32_t tops_begin, tops_end;  // into tops_
    uint32_t pool_size;             // nodes this step and earlier ones use
    bool can_end;
    bool terminated;
  };

  bool Feed(std::string_view bytes, bool* can_end);
  void PushStep(bool can_end, bool terminated);

  std::shared_ptr<const CompiledGrammar> grammar_;
  const TokenTable* tokens_;
  StackStepper stepper_;
  TokenWalker walker_;
  std::vector<StackNode> pool_;
  std::vector<StackNode> tops_;
  std::vector<Step> steps_;
  std::vector<StackNode> cur_, next_;
  std::vector<uint64_t> scratch_mask_;
};

}  // namespace tarmac::grammar
