// GrammarCache: one model's compiled grammars. It builds the vocabulary's TokenTable once, on
// the first constrained request (the other requests never pay for it), and keeps the most
// recently used compiled grammars by their GBNF text, so a schema an agent sends with every
// request is compiled once (a 50-property schema costs tens of milliseconds; bench/NOTES.md).
//
// Owns the table and the cached grammars (shared with the requests that use them). Thread-safe:
// any thread may Compile; two threads compiling the same new grammar at once may both compile
// it (the second result is kept), never block each other for the compile.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/token_table.h"
#include "tokenizer/tokenizer.h"

namespace tarmac::engine {

class GrammarCache {
 public:
  // Preconditions: tokenizer outlives the cache. capacity >= 1.
  explicit GrammarCache(const tok::Tokenizer* tokenizer, size_t capacity = 64);

  // The grammar compiled for this vocabulary (cached). Errors: the automaton's limits.
  Result<std::shared_ptr<const grammar::CompiledGrammar>> Compile(const grammar::Grammar& g);
  // The vocabulary's table (built on first use).
  std::shared_ptr<const grammar::TokenTable> tokens();

  struct Stats {
    int64_t hits = 0, misses = 0;
  };
  Stats stats() const;

 private:
  const tok::Tokenizer* tok_;
  const size_t capacity_;
  std::once_flag table_once_;
  std::shared_ptr<const grammar::TokenTable> table_;
  mutable std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  struct Entry {
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    std::list<std::string>::iterator pos;
  };
  std::unordered_map<std::string, Entry> map_;
  Stats stats_;
};

}  // namespace tarmac::engine
