// Model + tokenizer loading shared by the engine tests. A model runs one forward at a time,
// so tests that share a cached model must not run it from two threads at once.
#pragma once

#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <random>
#include <memory>
#include <string>

#include "engine/engine_core.h"
#include "engine/engine_types.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::testing {

inline const std::string kWp1m = TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf";
inline const std::string kWp1mDistill = TARMAC_SOURCE_DIR "/models/wp-1m-distill-f16.gguf";

struct LoadedModel {
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<tok::Tokenizer> tok;
};

inline LoadedModel LoadModel(const std::string& path) {
  LoadedModel l;
  l.model = std::move(model::LlamaModel::Load(path).value());
  l.tok = std::move(tok::Tokenizer::Create(tok::LoadVocab(l.model->file()).value()).value());
  return l;
}

// Loaded once per test binary and kept.
inline LoadedModel& CachedModel(const std::string& path) {
  static std::map<std::string, LoadedModel> cache;
  auto it = cache.find(path);
  if (it != cache.end()) return it->second;
  return cache.emplace(path, LoadModel(path)).first->second;
}

// n token ids spread over the vocabulary from `base` (distinct bases give distinct prompts).
inline std::vector<int32_t> SpreadIds(int32_t n, int32_t base) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 10 + (base + i * 7) % 1500;
  return v;
}

// A request that runs its whole max_tokens (ignore_eos), seeded, in namespace ns.
inline engine::EngineRequest FullLengthRequest(std::vector<int32_t> prompt, int32_t max_tokens, float temp = 0.0f,
                                               uint64_t ns = 0) {
  engine::EngineRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = temp;
  r.sampling.seed = 99;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.ns = ns;
  return r;
}

// A randomized workload on an engine stepped by the caller, for the prefix cache's event
// stream: prompts share four stems (cut at random lengths, with random tails) over three
// namespaces, lengths 1-20, a cancellation now and then. Step() maybe adds a request (up to
// max_requests), maybe cancels one, and runs one engine step.
struct CacheChurn {
  engine::EngineCore* core;
  std::mt19937_64 rng;
  int64_t max_requests;
  std::vector<std::vector<int32_t>> stems;
  std::map<int64_t, std::shared_ptr<engine::RequestStream>> live;
  int64_t next = 0, cancelled = 0;
  CacheChurn(engine::EngineCore* c, uint64_t seed, int64_t max = INT64_MAX) : core(c), rng(seed), max_requests(max) {
    for (int i = 0; i < 4; ++i) stems.push_back(SpreadIds(24 + 8 * i, 500 * i));
  }
  void Step() {
    if (next < max_requests && rng() % 2 == 0) {
      std::vector<int32_t> p = stems[rng() % stems.size()];
      p.resize(8 + rng() % p.size());
      const std::vector<int32_t> tail = SpreadIds(static_cast<int32_t>(rng() % 12), static_cast<int32_t>(rng() % 997));
      p.insert(p.end(), tail.begin(), tail.end());
      auto s = std::make_shared<engine::RequestStream>(next);
      ASSERT_TRUE(core->Add(next, FullLengthRequest(p, 1 + static_cast<int32_t>(rng() % 20), 0.0f, rng() % 3), s).ok());
      live[next++] = s;
    }
    if (rng() % 9 == 0 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      core->Cancel(it->first);
      live.erase(it);
      ++cancelled;
    }
    core->Step();
    for (auto it = live.begin(); it != live.end();) it = it->second->done() ? live.erase(it) : std::next(it);
  }
};

}  // namespace tarmac::testing
