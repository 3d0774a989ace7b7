// Vocab: the tokenizer description a GGUF file carries (tokenizer.ggml.*), as plain data.
// Built by LoadVocab (vocab_gguf.h) or by hand in tests; consumed by Tokenizer::Create, which
// validates it. No behaviour here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tarmac::tok {

// tokenizer.ggml.token_type values, as GGUF stores them.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabKind {
  kSpm,  // tokenizer.ggml.model = "llama": SentencePiece-style, merges by score, byte fallback
  kBpe,  // tokenizer.ggml.model = "gpt2": byte-level BPE with ranked merges
};

struct Vocab {
  VocabKind kind = VocabKind::kBpe;
  std::string pre = "gpt-2";             // BPE pre-tokenizer (tokenizer.ggml.pre)
  std::vector<std::string> tokens;       // [n_vocab] token text (BPE: byte-mapped; SPM: ▁ for space)
  std::vector<float> scores;             // [n_vocab] SPM merge scores (empty for BPE)
  std::vector<TokenType> types;          // [n_vocab] (empty: all normal)
  std::vector<std::string> merges;       // BPE merges "left right", rank = index
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  int32_t eot_id = -1;                   // end of turn (chat models), -1 if none
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;         // SPM: prepend a space to text that starts a fragment
  std::string chat_template;             // tokenizer.chat_template (Jinja source), "" if none
};

}  // namespace tarmac::tok
