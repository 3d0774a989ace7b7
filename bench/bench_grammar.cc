// Grammar-constrained decoding costs, per generated token and per schema.
//   BM_MaskStep/<vocab>/<grammar>   FillNextTokenMask + AcceptToken for each token of a JSON
//       document (tokenized as the model would write it) under a schema or {"type":
//       "json_object"}; items = tokens, so time/item is the per-token cost a decode step pays.
//   BM_AcceptOnly/...               AcceptToken alone on the same tokens (the mask's share is
//       the difference).
//   BM_ApplyMask/<vocab>            TokenBitmask::ApplyToLogits over the vocabulary's logits.
//   BM_Compile50Properties/<vocab>  schema -> grammar -> automaton -> precomputed masks for a
//       50-property object (one thread).
// <vocab>: 0 = wp-11m (2048 tokens, the repo's model), 1 = Llama 3.2 (128k, ../shared; skipped
// when absent).
#include <benchmark/benchmark.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_table.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::grammar {
namespace {

const char* const kVocabPaths[] = {TARMAC_SOURCE_DIR "/models/wp-11m-f16.gguf",
                                   TARMAC_SHARED_DIR "/models/llama3.2-vocab-random.gguf"};

struct Vocab {
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::shared_ptr<const TokenTable> table;
};

const Vocab* LoadVocab(int which) {
  static std::map<int, Vocab> cache;
  auto it = cache.find(which);
  if (it != cache.end()) return it->second.table ? &it->second : nullptr;
  Vocab v;
  if (auto file = gguf::File::Open(kVocabPaths[which]); file.ok()) {
    if (auto vocab = tok::LoadVocab(*file); vocab.ok()) {
      if (auto t = tok::Tokenizer::Create(std::move(vocab).value()); t.ok()) {
        v.tokenizer = std::move(t).value();
        v.table = TokenTable::Build(*v.tokenizer);
      }
    }
  }
  Vocab& slot = cache.emplace(which, std::move(v)).first->second;
  return slot.table ? &slot : nullptr;
}

constexpr const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},
  "age":{"type":"integer","minimum":0,"maximum":150},
  "email":{"type":"string","format":"email"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":10},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
             "zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["street","city"]},
  "active":{"type":"boolean"},
  "score":{"type":"number"}},
 "required":["name","age","tags","active"]})";

constexpr const char* kDocument = R"({
  "name": "Natasha Rostova",
  "age": 20,
  "email": "natasha@rostov.ru",
  "tags": ["countess", "moscow", "dancer", "war and peace"],
  "address": {"street": "Povarskaya 12", "city": "Moscow", "zip": "12345"},
  "active": true,
  "score": 97.5
})";

struct Case {
  std::shared_ptr<const CompiledGrammar> grammar;
  std::vector<int32_t> tokens;
};

// grammar: 0 = kSchema, 1 = any JSON object.
const Case* GetCase(int vocab, int grammar) {
  static std::map<std::pair<int, int>, Case> cache;
  auto key = std::make_pair(vocab, grammar);
  if (auto it = cache.find(key); it != cache.end()) return &it->second;
  const Vocab* v = LoadVocab(vocab);
  if (v == nullptr) return nullptr;
  auto g = grammar == 0 ? GrammarFromJsonSchemaText(kSchema) : Result<Grammar>(JsonObjectGrammar());
  if (!g.ok()) return nullptr;
  auto compiled = CompiledGrammar::Compile(*g, v->table);
  if (!compiled.ok()) return nullptr;
  Case c;
  c.grammar = *compiled;
  tok::EncodeOptions opts;
  opts.add_special = false;
  c.tokens = v->tokenizer->Encode(kDocument, opts);
  GrammarMatcher check(c.grammar);
  for (int32_t id : c.tokens)
    if (!check.AcceptToken(id)) return nullptr;
  return &cache.emplace(key, std::move(c)).first->second;
}

void BM_MaskStep(benchmark::State& state) {
  const Case* c = GetCase(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  if (c == nullptr) return state.SkipWithError("vocabulary or grammar unavailable");
  GrammarMatcher m(c->grammar);
  TokenBitmask mask;
  int64_t allowed = 0;
  for (auto _ : state) {
    m.Reset();
    for (int32_t id : c->tokens) {
      m.FillNextTokenMask(&mask);
      allowed += mask.Test(id);
      m.AcceptToken(id);
    }
  }
  benchmark::DoNotOptimize(allowed);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(c->tokens.size()));
  state.counters["tokens"] = static_cast<double>(c->tokens.size());
  state.counters["n_vocab"] = c->grammar->tokens().n_vocab();
}

void BM_AcceptOnly(benchmark::State& state) {
  const Case* c = GetCase(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  if (c == nullptr) return state.SkipWithError("vocabulary or grammar unavailable");
  GrammarMatcher m(c->grammar);
  for (auto _ : state) {
    m.Reset();
    for (int32_t id : c->tokens) m.AcceptToken(id);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(c->tokens.size()));
}

void BM_ApplyMask(benchmark::State& state) {
  const Case* c = GetCase(static_cast<int>(state.range(0)), 0);
  if (c == nullptr) return state.SkipWithError("vocabulary unavailable");
  GrammarMatcher m(c->grammar);
  TokenBitmask mask;
  m.FillNextTokenMask(&mask);
  std::vector<float> logits(mask.size(), 0.5f);
  for (auto _ : state) {
    mask.ApplyToLogits(logits);
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetItemsProcessed(state.iterations());
}

std::string FiftyProperties() {
  const char* kinds[] = {R"({"type":"string"})",
                         R"({"type":"integer","minimum":0,"maximum":100000})",
                         R"({"type":"number"})",
                         R"({"type":"boolean"})",
                         R"({"enum":["low","medium","high"]})",
                         R"({"type":"array","items":{"type":"string"},"maxItems":5})",
                         R"({"type":"string","maxLength":16})",
                         R"({"type":"string","format":"date"})",
                         R"({"anyOf":[{"type":"integer"},{"type":"null"}]})",
                         R"({"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]})"};
  std::string props, required;
  for (int i = 0; i < 50; ++i) {
    props += fmt::format("{}\"field_{:02d}\":{}", i ? "," : "", i, kinds[i % 10]);
    if (i % 2 == 0) required += fmt::format("{}\"field_{:02d}\"", required.empty() ? "" : ",", i);
  }
  return "{\"type\":\"object\",\"properties\":{" + props + "},\"required\":[" + required + "]}";
}

void BM_Compile50Properties(benchmark::State& state) {
  const Vocab* v = LoadVocab(static_cast<int>(state.range(0)));
  if (v == nullptr) return state.SkipWithError("vocabulary unavailable");
  const std::string schema = FiftyProperties();
  CompileStats stats;
  for (auto _ : state) {
    auto g = GrammarFromJsonSchemaText(schema);
    auto c = CompiledGrammar::Compile(*g, v->table);
    if (!c.ok()) return state.SkipWithError(c.status().ToString().c_str());
    stats = (*c)->stats();
  }
  state.counters["states"] = stats.num_states;
  state.counters["mask_classes"] = stats.num_mask_classes;
  state.counters["automaton_ms"] = stats.automaton_ms;
  state.counters["masks_ms"] = stats.masks_ms;
  state.counters["mask_MB"] = static_cast<double>(stats.mask_bytes) / (1 << 20);
}

BENCHMARK(BM_MaskStep)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"vocab", "grammar"});
BENCHMARK(BM_AcceptOnly)->ArgsProduct({{0, 1}, {0, 1}})->ArgNames({"vocab", "grammar"});
BENCHMARK(BM_ApplyMask)->Arg(0)->Arg(1)->ArgName("vocab");
BENCHMARK(BM_Compile50Properties)->Arg(0)->Arg(1)->ArgName("vocab")->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace tarmac::grammar

BENCHMARK_MAIN();
