// TokenWalker: feeds the bytes of many tokens, in byte order, through a StackStepper from one
// start stack, so that tokens sharing a prefix share its steps and a prefix the grammar
// rejects rejects every token that starts with it without visiting them.
//
// Walk keeps one configuration per depth of the current token; the next token resumes at the
// depth it shares with the previous one. Events: on_end(k, accepted, bottom_seen) when token k
// is consumed (accepted: some stack survived its last byte or the bottom rule completed
// exactly there; bottom_seen: the bottom rule completed after an earlier byte of it), and
// on_dead(begin, end, bottom_seen) for a run of tokens whose common prefix no stack survives.
// The pool is restored to its size at entry.
//
// Scratch only; one per thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/stack_stepper.h"
#include "grammar/token_table.h"

namespace tarmac::grammar {

// All text tokens of a table, in byte order.
struct AllTokens {
  const TokenTable* table;
  int32_t size() const { return table->num_sorted(); }
  std::string_view bytes(int32_t k) const { return table->sorted_bytes(k); }
  int32_t lcp(int32_t k) const { return table->lcp(k); }
  int32_t Skip(int32_t k, int32_t depth) const { return table->SubtreeEnd(k, depth); }
};

// A subset of sorted positions, ascending, with each one's common prefix with the previous.
struct TokenSubset {
  const TokenTable* table;
  std::span<const int32_t> positions;
  std::span<const uint16_t> lcps;
  int32_t size() const { return static_cast<int32_t>(positions.size()); }
  std::string_view bytes(int32_t k) const { return table->sorted_bytes(positions[k]); }
  int32_t lcp(int32_t k) const { return lcps[k]; }
  int32_t Skip(int32_t k, int32_t depth) const {
    int32_t j = k + 1;
    while (j < size() && lcps[j] > depth) ++j;
    return j;
  }
};

class TokenWalker {
 public:
  explicit TokenWalker(const Automaton* automaton) : a_(automaton), stepper_(automaton) {}

  template <typename Tokens, typename OnEnd, typename OnDead>
  void Walk(std::vector<StackNode>* pool, StackNode start_top, const Tokens& tokens, OnEnd on_end, OnDead on_dead) {
    levels_.clear();
    tops_.clear();
    tops_.push_back(start_top);
    levels_.push_back({0, 1, static_cast<uint32_t>(pool->size()), false, false});
    const int32_t n = tokens.size();
    int32_t k = 0;
    while (k < n) {
      const std::string_view bytes = tokens.bytes(k);
      const int32_t len = static_cast<int32_t>(bytes.size());
      int32_t d = k == 0 ? 0 : tokens.lcp(k);
      Truncate(pool, d);
      while (true) {
        if (d == len) {
          const Level& last = levels_[d];
          on_end(k, last.tops_end > last.tops_begin || last.bottom_here, levels_[d - 1].bottom_seen);
          ++k;
          break;
        }
        const Level cur = levels_[d];
        if (cur.tops_end - cur.tops_begin == 1) {
          // One stack moving inside its rule: no closure, no stepper call.
          const StackNode top = tops_[cur.tops_begin];
          const int32_t next = a_->Next(top.state, static_cast<uint8_t>(bytes[d]));
          if (next >= 0 && a_->plain(next)) {
            tops_.push_back({next, top.parent});
            levels_.push_back({cur.tops_end, cur.tops_end + 1, cur.pool_size, false, cur.bottom_seen});
            ++d;
            continue;
          }
        }
        scratch_.clear();
        const bool bottom = stepper_.Step(pool, {tops_.data() + cur.tops_begin, cur.tops_end - cur.tops_begin},
                                          static_cast<uint8_t>(bytes[d]), &scratch_);
        if (scratch_.empty() && !bottom) {
          const int32_t end = tokens.Skip(k, d);
          on_dead(k, end, cur.bottom_seen);
          k = end;
          break;
        }
        const uint32_t begin = static_cast<uint32_t>(tops_.size());
        if (scratch_.size() == 1) {
          tops_.push_back(scratch_[0]);
        } else {
          tops_.insert(tops_.end(), scratch_.begin(), scratch_.end());
        }
        levels_.push_back({begin, static_cast<uint32_t>(tops_.size()), static_cast<uint32_t>(pool->size()), bottom,
                           cur.bottom_seen || bottom});
        ++d;
      }
    }
    Truncate(pool, 0);
  }

 private:
  struct Level {
    uint32_t tops_begin, tops_end;
    uint32_t pool_size;
    bool bottom_here;  // the bottom rule completed after this depth's last byte
    bool bottom_seen;  // ... after this or an earlier byte
  };

  void Truncate(std::vector<StackNode>* pool, int32_t depth) {
    levels_.resize(depth + 1);
    tops_.resize(levels_[depth].tops_end);
    pool->resize(levels_[depth].pool_size);
  }

  const Automaton* a_;
  StackStepper stepper_;
  std::vector<Level> levels_;
  std::vector<StackNode> tops_;
  std::vector<StackNode> scratch_;
};

}  // namespace tarmac::grammar
