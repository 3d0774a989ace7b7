#include "engine/grammar_cache.h"

#include "base/check.h"

namespace tarmac::engine {

GrammarCache::GrammarCache(const tok::Tokenizer* tokenizer, size_t capacity) : tok_(tokenizer), capacity_(capacity) {
  TARMAC_CHECK(tokenizer != nullptr && capacity >= 1);
}

std::shared_ptr<const grammar::TokenTable> GrammarCache::tokens() {
  std::call_once(table_once_, [this] { table_ = grammar::TokenTable::Build(*tok_); });
  return table_;
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> GrammarCache::Compile(const grammar::Grammar& g) {
  std::string key = g.ToGbnf();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = map_.find(key); it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.pos);
      ++stats_.hits;
      return it->second.grammar;
    }
    ++stats_.misses;
  }
  // Compiled outside the lock: one slow schema must not hold up requests with cached ones.
  TARMAC_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::CompiledGrammar> compiled,
                          grammar::CompiledGrammar::Compile(g, tokens()));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = map_.find(key); it != map_.end()) {
    it->second.grammar = compiled;
    lru_.splice(lru_.begin(), lru_, it->second.pos);
    return compiled;
  }
  lru_.push_front(key);
  map_.emplace(std::move(key), Entry{compiled, lru_.begin()});
  while (map_.size() > capacity_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  return compiled;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace tarmac::engine
