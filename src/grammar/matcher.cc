#include "grammar/matcher.h"

#include "base/check.h"

namespace tarmac::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)),
      tokens_(&grammar_->tokens()),
      stepper_(&grammar_->automaton()),
      walker_(&grammar_->automaton()) {
  TARMAC_CHECK(grammar_ != nullptr);
  const Automaton& a = grammar_->automaton();
  const bool can_end = stepper_.Expand(&pool_, a.root_start(), -1, &cur_);
  PushStep(can_end, false);
}

void GrammarMatcher::PushStep(bool can_end, bool terminated) {
  Step st;
  st.tops_begin = static_cast<uint32_t>(tops_.size());
  tops_.insert(tops_.end(), cur_.begin(), cur_.end());
  st.tops_end = static_cast<uint32_t>(tops_.size());
  st.pool_size = static_cast<uint32_t>(pool_.size());
  st.can_end = can_end;
  st.terminated = terminated;
  steps_.push_back(st);
}

// Runs bytes from the current tops into cur_. On failure the pool is restored.
bool GrammarMatcher::Feed(std::string_view bytes, bool* can_end) {
  const Step& st = steps_.back();
  cur_.assign(tops_.begin() + st.tops_begin, tops_.begin() + st.tops_end);
  bool bottom = st.can_end;
  for (size_t i = 0; i < bytes.size(); ++i) {
    next_.clear();
    bottom = stepper_.Step(&pool_, cur_, static_cast<uint8_t>(bytes[i]), &next_);
    const bool last = i + 1 == bytes.size();
    if (next_.empty() && !(bottom && last)) {
      pool_.resize(st.pool_size);
      return false;
    }
    std::swap(cur_, next_);
  }
  *can_end = bottom;
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  if (id < 0 || id >= tokens_->n_vocab() || IsTerminated()) return false;
  if (tokens_->is_eog(id)) {
    if (!CanEnd()) return false;
    cur_.clear();
    PushStep(false, true);
    return true;
  }
  if (!tokens_->is_text(id)) return false;
  bool can_end = false;
  if (!Feed(tokens_->bytes(id), &can_end)) return false;
  PushStep(can_end, false);
  return true;
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (IsTerminated()) return false;
  bool can_end = false;
  if (!Feed(bytes, &can_end)) return false;
  PushStep(can_end, false);
  return true;
}

void GrammarMatcher::FillNextTokenMask(TokenBitmask* mask) {
  if (mask->size() != tokens_->n_vocab()) *mask = TokenBitmask(tokens_->n_vocab());
  uint64_t* words = mask->words();
  const size_t nw = mask->num_words();
  const Step& st = steps_.back();
  if (st.terminated || st.tops_end == st.tops_begin) {
    mask->Clear();
  } else {
    grammar_->WriteContextFreeMask(tops_[st.tops_begin].state, words);
    scratch_mask_.resize(nw);
    for (uint32_t i = st.tops_begin + 1; i < st.tops_end; ++i) {
      grammar_->WriteContextFreeMask(tops_[i].state, scratch_mask_.data());
      for (size_t w = 0; w < nw; ++w) words[w] |= scratch_mask_[w];
    }
    // Tokens that run past the end of a top's rule: try them on the real stack.
    for (uint32_t i = st.tops_begin; i < st.tops_end; ++i) {
      const StackNode top = tops_[i];
      const int32_t s = top.state;
      const TokenSubset subset{tokens_, grammar_->uncertain_positions(s), grammar_->uncertain_lcps(s)};
      if (subset.size() == 0) continue;
      walker_.Walk(
          &pool_, top, subset,
          [&](int32_t k, bool accepted, bool) {
            if (accepted) mask->Set(tokens_->sorted_id(subset.positions[k]));
          },
          [](int32_t, int32_t, bool) {});
    }
  }
  if (st.can_end)
    for (int32_t id : tokens_->eog_ids()) mask->Set(id);
}

void GrammarMatcher::Rollback(int32_t n) {
  TARMAC_CHECK(n >= 0 && n <= num_accepted());
  steps_.resize(steps_.size() - n);
  tops_.resize(steps_.back().tops_end);
  pool_.resize(steps_.back().pool_size);
}

}  // namespace tarmac::grammar
