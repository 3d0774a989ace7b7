// Speculative-decoding flags shared by generate, bench offline and serve:
//   --spec off|draft|ngram|auto  --draft-model FILE  --spec-k N
// The draft defaults to wp-1m-f16.gguf beside a wp-11m target (the bundled pair).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "engine/engine_types.h"
#include "model/llama_model.h"

namespace tarmac::apps {

struct SpecArgs {
  std::string mode = "off";
  std::string draft_model;
  int k = 4;
};

void AddSpecFlags(CLI::App* cmd, SpecArgs* a);

struct SpecSetup {
  engine::SpecMode mode = engine::SpecMode::kOff;
  std::unique_ptr<model::LlamaModel> draft;  // loaded when the mode uses one
  int k = 4;
  std::string draft_path;
};

// Loads the draft model when needed; errors name the flag.
Result<SpecSetup> LoadSpec(const SpecArgs& a, const std::string& target_path);

// Fills the engine config's speculation fields from a setup.
void ApplySpec(const SpecSetup& s, engine::EngineConfig* cfg);

}  // namespace tarmac::apps
