#include "engine/grammar_constraint.h"

namespace tarmac::engine {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> grammar)
    : matcher_(std::move(grammar)) {}

const grammar::TokenBitmask* GrammarConstraint::Mask() {
  matcher_.FillNextTokenMask(&mask_);
  for (int32_t w = 0; w < mask_.num_words(); ++w)
    if (mask_.words()[w] != 0) return &mask_;
  return nullptr;
}

bool GrammarConstraint::Accept(int32_t token) { return matcher_.AcceptToken(token); }

int32_t GrammarConstraint::CheckDraft(std::span<const sampling::DraftToken> draft) {
  int32_t ok = 0;
  while (ok < static_cast<int32_t>(draft.size()) && matcher_.AcceptToken(draft[ok].id)) ++ok;
  matcher_.Rollback(ok);
  return ok;
}

}  // namespace tarmac::engine
