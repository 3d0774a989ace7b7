// PreTokenizer: splits text into the "words" a byte-level BPE vocabulary was trained on, with
// the model family's regex (tokenizer.ggml.pre), through PCRE2 (UTF + Unicode properties, JIT).
// Immutable after Create; Split is const and thread-safe (match data is per call).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tarmac::tok {

class PreTokenizer {
 public:
  // Known names: "gpt-2", "default", "llama-bpe" (Llama 3), "llama3", "qwen2", "smollm",
  // "tekken"... see .cc. Unknown names are an error naming the value.
  static Result<std::unique_ptr<PreTokenizer>> Create(std::string_view pre_name);
  ~PreTokenizer();

  // Appends the pieces of text to out (views into text), in order; together they cover text.
  void Split(std::string_view text, std::vector<std::string_view>* out) const;

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tarmac::tok
