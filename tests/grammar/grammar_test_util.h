// Shared helpers of the grammar tests: vocabularies (the repo's wp-11m, ../shared's 128k
// Llama-3.2 one), compiling, brute-force masks, random walks through a matcher.
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gguf/gguf_file.h"
#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_table.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::grammar::testing {

inline const std::string kWp11m = TARMAC_SOURCE_DIR "/models/wp-11m-f16.gguf";
inline const std::string kLlama3Vocab = TARMAC_SHARED_DIR "/models/llama3.2-vocab-random.gguf";

inline bool FileExists(const std::string& p) { return std::ifstream(p).good(); }

struct LoadedVocab {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::shared_ptr<const TokenTable> table;
};

// Loaded once per test binary; nullptr when the file is absent.
inline const LoadedVocab* Vocab(const std::string& path) {
  static std::map<std::string, LoadedVocab> cache;
  auto it = cache.find(path);
  if (it != cache.end()) return it->second.table ? &it->second : nullptr;
  LoadedVocab v;
  if (FileExists(path)) {
    auto file = gguf::File::Open(path);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    auto vocab = tok::LoadVocab(*file);
    EXPECT_TRUE(vocab.ok()) << vocab.status().ToString();
    auto tok = tok::Tokenizer::Create(std::move(vocab).value());
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    v.tokenizer = std::move(tok).value();
    v.table = TokenTable::Build(*v.tokenizer);
  }
  auto& slot = cache.emplace(path, std::move(v)).first->second;
  return slot.table ? &slot : nullptr;
}

// A small vocabulary for exhaustive checks: all single bytes of printable ASCII plus some
// multi-character pieces that cross grammar elements, multi-byte UTF-8 and partial bytes.
inline std::shared_ptr<const TokenTable> ToyTable() {
  std::vector<std::string> pieces = {"<eos>"};
  for (int c = 0x20; c < 0x7F; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
  for (const char* p : {"\n", "\t", "ab", "abc", "ba", "\"a", "a\"", "\",", "\":", "\": ", "{\"", "}\n", "true", "tr",
                        "null,", "12", "3.", "-1", "e+", "é", "\xC3", "\xA9", "日本", "\xE6\x97", "\":\"", " \"", ", \"",
                        "\"}", "]}", "[{", "x\"y", "\\n", "\\u00", "  "})
    pieces.push_back(p);
  pieces[0] = "";  // id 0: end of generation
  return TokenTable::FromPieces(std::move(pieces), {0});
}

inline std::shared_ptr<const CompiledGrammar> MustCompile(const Grammar& g, std::shared_ptr<const TokenTable> t) {
  auto c = CompiledGrammar::Compile(g, std::move(t));
  EXPECT_TRUE(c.ok()) << c.status().ToString() << "\n" << g.ToGbnf();
  return c.ok() ? c.value() : nullptr;
}

// The mask by trying every token on a copy of the matcher.
inline TokenBitmask BruteForceMask(const GrammarMatcher& m) {
  GrammarMatcher copy = m;
  const int32_t n = m.grammar().tokens().n_vocab();
  TokenBitmask mask(n);
  for (int32_t id = 0; id < n; ++id) {
    if (copy.AcceptToken(id)) {
      mask.Set(id);
      copy.Rollback(1);
    }
  }
  return mask;
}

inline std::string Bytes(const TokenTable& t, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += t.bytes(id);
  return s;
}

// Random allowed tokens until the grammar ends (end-of-generation picked with probability
// p_end whenever allowed, always when nothing else is) or max_tokens pass. Returns the text, or
// nullopt when it did not end in time.
inline std::optional<std::string> RandomWalk(GrammarMatcher* m, std::mt19937_64* rng, int max_tokens,
                                             double p_end = 0.25) {
  TokenBitmask mask;
  std::vector<int32_t> ids;
  const TokenTable& t = m->grammar().tokens();
  for (int step = 0; step < max_tokens; ++step) {
    if (m->CanEnd() && (!m->CanContinue() || std::uniform_real_distribution<double>(0, 1)(*rng) < p_end))
      return Bytes(t, ids);
    m->FillNextTokenMask(&mask);
    std::vector<int32_t> allowed;
    for (int32_t id : mask.AllowedIds())
      if (!t.is_eog(id)) allowed.push_back(id);
    if (allowed.empty()) {
      ADD_FAILURE() << "no text token allowed and the grammar cannot end, after: " << Bytes(t, ids);
      return std::nullopt;
    }
    const int32_t id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(*rng)];
    if (!m->AcceptToken(id)) {
      ADD_FAILURE() << "mask allowed token " << id << " that AcceptToken refused";
      return std::nullopt;
    }
    ids.push_back(id);
  }
  return std::nullopt;
}

}  // namespace tarmac::grammar::testing
