// libFuzzer target for the grammar compiler (src/grammar): the input is read as a GBNF grammar,
// as a JSON schema and as a regular expression (the three text front ends of structured
// outputs); each that yields a grammar is built into its automaton (with limits a little
// smaller than the server's, so that one input stays fast) and compiled against a small
// vocabulary, and a matcher then walks the input's own bytes through it. Any input must compile
// or fail with a status naming the construct; nothing may crash, hang, leak or throw.
// Run: scripts/fuzz.sh grammar SECONDS.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex_parser.h"
#include "grammar/token_bitmask.h"

namespace {

using namespace tarmac::grammar;

// Printable ASCII, some pieces that cross JSON and GBNF elements, multi-byte and partial UTF-8.
std::shared_ptr<const TokenTable> Table() {
  static const std::shared_ptr<const TokenTable> t = [] {
    std::vector<std::string> pieces = {""};  // id 0: end of generation
    for (int c = 0x20; c < 0x7F; ++c) pieces.push_back(std::string(1, static_cast<char>(c)));
    for (const char* p : {"\n", "\t", "ab", "\"a", "\",", "\": ", "{\"", "}\n", "true", "null,", "12", "-1", "e+",
                          "é", "\xC3", "\xA9", "日本", "\xE6\x97", "\\n", "\\u00", "  ", "\xF0\x9F\x98\x80"})
      pieces.push_back(p);
    return TokenTable::FromPieces(std::move(pieces), {0});
  }();
  return t;
}

void Fail(const char* what, const std::string& msg) {
  std::fprintf(stderr, "grammar fuzz: %s: %s\n", what, msg.c_str());
  std::abort();
}

void Exercise(const char* front_end, const tarmac::Result<Grammar>& g, std::string_view input) {
  if (!g.ok()) {
    if (g.status().message().empty()) Fail(front_end, "error without a message");
    return;
  }
  (void)g->ToGbnf();
  CompileOptions opts;
  opts.limits.max_nfa_states = 20000;
  opts.limits.max_dfa_states = 4000;
  auto c = CompiledGrammar::Compile(*g, Table(), opts);
  if (!c.ok()) {
    if (c.status().message().empty()) Fail(front_end, "compile error without a message");
    return;
  }
  GrammarMatcher m(*c);
  TokenBitmask mask(Table()->n_vocab());
  for (size_t i = 0; i < input.size() && i < 64; ++i) {
    m.FillNextTokenMask(&mask);
    if (!m.AcceptBytes(input.substr(i, 1))) break;
  }
  m.FillNextTokenMask(&mask);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    Exercise("gbnf", ParseGbnf(text), text);
    Exercise("json schema", GrammarFromJsonSchemaText(text), text);
    Exercise("regex", GrammarFromRegex(text), text);
  } catch (const std::exception& ex) {
    Fail("exception escaped", ex.what());
  }
  return 0;
}
