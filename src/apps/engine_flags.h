// Speculative-decoding flags shared by generate, bench offline and serve:
//   --spec off|draft|ngram|auto  --draft-model FILE  --spec-k N  --draft-type q8_0|keep
//   --spec-max-slowdown F
// The draft defaults to wp-1m-f16.gguf beside a wp-11m target (the bundled pair). A draft
// whose weights are all f32/f16/bf16 is quantized to Q8_0 at load unless --draft-type keep:
// a draft round reads half the bytes (wp-1m: 58 -> 23 us a token on one thread), and the
// target's verification keeps the output exact whatever the draft proposes. When quantizing
// fails (it goes through a temporary file) the draft loads as stored, with a warning.
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
  std::string draft_type = "q8_0";  // q8_0 | keep
  double max_slowdown = 0.05;        // policy: others' step slowdown limit; negative: none
};

void AddSpecFlags(CLI::App* cmd, SpecArgs* a);

struct SpecSetup {
  engine::SpecMode mode = engine::SpecMode::kOff;
  std::unique_ptr<model::LlamaModel> draft;  // loaded when the mode uses one
  int k = 4;
  std::string draft_path;
  bool draft_quantized = false;  // the draft's float weights were quantized to Q8_0 at load
  double max_slowdown = 0.05;
};

// Loads the draft model when needed; errors name the flag.
Result<SpecSetup> LoadSpec(const SpecArgs& a, const std::string& target_path);

// Fills the engine config's speculation fields from a setup.
void ApplySpec(const SpecSetup& s, engine::EngineConfig* cfg);

}  // namespace tarmac::apps
