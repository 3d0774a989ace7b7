// Shared by the model-running subcommands: load a model and its tokenizer, print what was
// loaded, and fault the mapped weights in (with progress on a terminal) so the first token is
// not charged for disk reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace tarmac::apps {

struct LoadedModel {
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<tok::Tokenizer> tokenizer;
};

// Errors name the file and what is wrong with it. quiet: no summary line. use_mmap: see
// LlamaModel::Load; off by default for the CLI (weights copied into huge-page memory decode
// faster on models larger than the caches; bench/NOTES.md). context: the longest sequence
// the command will run (0: the model's trained context), which LongRoPE families (Phi-3) pick
// their long or short rope factors by (LlamaModel::Load).
Result<LoadedModel> LoadModelAndTokenizer(const std::string& path, bool quiet = false,
                                          bool use_mmap = false, int32_t context = 0);

}  // namespace tarmac::apps
