// Shared helpers of the grammar tests: vocabularies (the repo's wp-11m, ../shared's 128k
// Llama-3.2 one), compiling, brute-force masks, random walks through a matcher.
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
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

struct WalkOptions {
  int max_tokens = 400;
  double p_end = 0.3;         // stop with this probability wherever the grammar may end
  double closer_boost = 30;   // weight of tokens holding '"', ']' or '}' (walks then finish)
  bool check_brute_force = false;  // compare every mask with BruteForceMask
  std::vector<TokenBitmask>* masks = nullptr;  // if set: the mask before each token
};

// Random allowed tokens until the grammar ends (then an end-of-generation token, which must
// be allowed) or max_tokens pass. Returns the text, or nullopt when it did not end in time.
inline std::optional<std::string> RandomWalk(GrammarMatcher* m, std::mt19937_64* rng, const WalkOptions& opts = {}) {
  TokenBitmask mask;
  std::vector<int32_t> ids;
  const TokenTable& t = m->grammar().tokens();
  for (int step = 0; step < opts.max_tokens; ++step) {
    m->FillNextTokenMask(&mask);
    if (opts.masks) opts.masks->push_back(mask);
    if (opts.check_brute_force) {
      const TokenBitmask brute = BruteForceMask(*m);
      EXPECT_EQ(mask.AllowedIds(), brute.AllowedIds()) << "mask differs from brute force after: " << Bytes(t, ids);
      if (mask.AllowedIds() != brute.AllowedIds()) return std::nullopt;
    }
    std::vector<int32_t> text, eog;
    for (int32_t id : mask.AllowedIds()) (t.is_eog(id) ? eog : text).push_back(id);
    EXPECT_EQ(!eog.empty(), m->CanEnd());
    if (m->CanEnd() && (text.empty() || std::uniform_real_distribution<double>(0, 1)(*rng) < opts.p_end)) {
      EXPECT_TRUE(m->AcceptToken(eog[0]));
      EXPECT_TRUE(m->IsTerminated());
      return Bytes(t, ids);
    }
    if (text.empty()) {
      ADD_FAILURE() << "no token allowed and the grammar cannot end, after: " << Bytes(t, ids);
      return std::nullopt;
    }
    std::vector<double> weights;
    for (int32_t id : text) {
      const std::string_view b = t.bytes(id);
      weights.push_back(b.find_first_of("\"]}") != std::string_view::npos ? opts.closer_boost : 1.0);
    }
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    const int32_t id = text[pick(*rng)];
    if (!m->AcceptToken(id)) {
      ADD_FAILURE() << "mask allowed token " << id << " that AcceptToken refused";
      return std::nullopt;
    }
    ids.push_back(id);
  }
  return std::nullopt;
}

// True if text is a complete sentence of the grammar.
inline bool Matches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text) && m.CanEnd();
}

// python3 with jsonschema (Debian's interpreter first: one earlier on PATH may lack it), or "".
inline std::string PythonWithJsonschema() {
  for (const char* candidate : {"/usr/bin/python3", "python3"}) {
    const std::string probe = std::string(candidate) + " -c 'import jsonschema' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return candidate;
  }
  return "";
}

}  // namespace tarmac::grammar::testing
