// GrammarConstraint: one request's constrained decoding in the engine. It holds the request's
// matcher over a shared compiled grammar and the mask buffer, and answers the step's three
// questions: which tokens may come next (Mask, applied to the logits before sampling), is the
// sampled token taken (Accept), and how far a speculative draft can go before the grammar
// forbids a token (CheckDraft: drafts are cut there, so verification never spends a position
// on a token the output could not hold).
//
// The engine core owns one per constrained request (the scheduler never sees it); a free
// request has none and pays nothing. Owns its matcher and mask; shares the CompiledGrammar
// (immutable). Not thread-safe: used by the engine's step thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_bitmask.h"
#include "sampling/speculative.h"

namespace tarmac::engine {

class GrammarConstraint {
 public:
  // Preconditions: grammar != nullptr.
  explicit GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> grammar);

  // The tokens allowed after those accepted so far; null when none is (the output is
  // complete: the caller finishes the request instead of sampling). The mask stays valid
  // until the next call of any mutating method.
  const grammar::TokenBitmask* Mask();
  // Takes the sampled token. False when the grammar does not allow it (then nothing changes).
  bool Accept(int32_t token);
  // The grammar admits nothing more but the end (or has ended): the request is finished.
  bool Complete() const { return matcher_.IsTerminated() || !matcher_.CanContinue(); }

  // How many leading draft tokens the grammar allows from the current state (the rest are
  // cut). Leaves the matcher as it was.
  int32_t CheckDraft(std::span<const sampling::DraftToken> draft);

  int32_t num_accepted() const { return matcher_.num_accepted(); }

 private:
  grammar::GrammarMatcher matcher_;
  grammar::TokenBitmask mask_;
};

}  // namespace tarmac::engine
