// Model + tokenizer loading shared by the engine tests. A model runs one forward at a time,
// so tests that share a cached model must not run it from two threads at once.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::testing {

inline const std::string kWp1m = TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf";

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

}  // namespace tarmac::testing
