// CompiledGrammar: a grammar's automaton plus, for one vocabulary, the token masks that do not
// depend on the stack, precomputed per automaton state (xgrammar's adaptive token mask cache).
//
// For a state s with byte edges, every text token is classified by running its bytes from a
// stack holding only s: accepted (consumed while s's rule, or rules it calls, is still
// running, or exactly when the rule completes), rejected (no stack survives before the rule
// could complete), or uncertain (the rule completes part-way through the token, so the rest
// depends on the rules below it on the stack). At run time a matcher ORs the accepted set of
// each of its stack tops and checks only the uncertain tokens against the real stack. A rule
// no one calls (the root) completes the whole output, so for its states nothing is uncertain.
//
// States that classify every token alike (mask_classes.h: e.g. the positions of a long
// counted repetition) share one precomputed entry. Each entry keeps its accepted set in the
// smallest form: a list of accepted ids, a list of the text tokens not accepted, or a bitset.
//
// Immutable after Compile; share it (shared_ptr) between every request that uses the grammar
// with this vocabulary, from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/token_table.h"

namespace tarmac::grammar {

struct CompileOptions {
  int num_threads = 1;  // precomputation threads (states are independent)
  AutomatonLimits limits;
};

struct CompileStats {
  int32_t num_states = 0;          // automaton states
  int32_t num_mask_states = 0;     // states with byte edges
  int32_t num_mask_classes = 0;    // precomputed masks (states with equal masks share one)
  int64_t num_uncertain = 0;       // uncertain (state, token) pairs over all states
  int64_t mask_bytes = 0;          // storage of the precomputed masks
  double automaton_ms = 0;
  double masks_ms = 0;
};

class CompiledGrammar {
 public:
  // Errors are the automaton's (automaton.h).
  static Result<std::shared_ptr<const CompiledGrammar>> Compile(const Grammar& grammar,
                                                               std::shared_ptr<const TokenTable> tokens,
                                                               const CompileOptions& options = {});

  const Automaton& automaton() const { return automaton_; }
  const TokenTable& tokens() const { return *tokens_; }
  const CompileStats& stats() const { return stats_; }

  // Writes (not ORs) into out, tokens().n_vocab() bits, the tokens accepted from state s
  // whatever the stack below. Preconditions: automaton().has_bytes(s).
  void WriteContextFreeMask(int32_t s, uint64_t* out) const;
  // Uncertain tokens of state s as sorted positions (TokenTable order) and the common prefix
  // of each with the previous one.
  std::span<const int32_t> uncertain_positions(int32_t s) const {
    const StateMask& m = masks_[class_[s]];
    return {uncertain_.data() + m.unc_begin, m.unc_end - m.unc_begin};
  }
  std::span<const uint16_t> uncertain_lcps(int32_t s) const {
    const StateMask& m = masks_[class_[s]];
    return {uncertain_lcp_.data() + m.unc_begin, m.unc_end - m.unc_begin};
  }

 private:
  enum class Storage : uint8_t { kNone, kAcceptedIds, kRejectedIds, kBitset };
  struct StateMask {
    Storage storage = Storage::kNone;
    uint32_t begin = 0, end = 0;          // ids_ range, or bitset word offset in words_
    uint32_t unc_begin = 0, unc_end = 0;  // uncertain_ range
  };
  struct Classified;

  CompiledGrammar(Automaton automaton, std::shared_ptr<const TokenTable> tokens)
      : automaton_(std::move(automaton)), tokens_(std::move(tokens)) {}
  void Precompute(int num_threads);
  void Store(int32_t cls, Classified&& c);

  Automaton automaton_;
  std::shared_ptr<const TokenTable> tokens_;
  std::vector<int32_t> class_;     // per state: index into masks_
  std::vector<StateMask> masks_;   // per mask class
  std::vector<int32_t> ids_;
  std::vector<uint64_t> words_;
  std::vector<int32_t> uncertain_;
  std::vector<uint16_t> uncertain_lcp_;
  CompileStats stats_;
};

}  // namespace tarmac::grammar
