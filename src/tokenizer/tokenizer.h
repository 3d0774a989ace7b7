// Tokenizer: text <-> token ids for one vocabulary (SentencePiece-style or byte-level BPE),
// with special-token handling. Immutable after Create; Encode/Decode are const and safe to
// call from many threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace tarmac::tok {

class PreTokenizer;

struct EncodeOptions {
  bool add_special = true;     // add BOS/EOS as the vocabulary asks
  bool parse_special = false;  // recognise special-token text (e.g. "<|eot_id|>") in the input
  // With parse_special: byte ranges [first, second) of the input, sorted and disjoint, where
  // special-token text stays text (a chat message's content inside a rendered template). A
  // special token is recognised only where its text starts outside every range. Borrowed.
  const std::vector<std::pair<size_t, size_t>>* literal_ranges = nullptr;
};

class Tokenizer {
 public:
  // Validates the vocabulary (ids in range, merges well-formed, byte tokens present where the
  // algorithm needs them); errors name the offending entry.
  static Result<std::unique_ptr<Tokenizer>> Create(Vocab vocab);
  ~Tokenizer();

  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& opts = {}) const;

  // Raw bytes of one token as it contributes to output text (may be a partial UTF-8 character
  // for byte tokens). Control tokens give "" unless render_special.
  std::string TokenToPiece(int32_t id, bool render_special = false) const;

  // Concatenated pieces. For SPM with add_space_prefix, the space the encoder added in front
  // of the first token is removed again.
  std::string Decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  const Vocab& vocab() const { return vocab_; }
  int32_t n_vocab() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  bool IsControl(int32_t id) const;
  // True for tokens that end generation (eos, eot).
  bool IsEndOfGeneration(int32_t id) const;
  // Token id of exact token text, or -1.
  int32_t Find(std::string_view text) const;
  // Control and user-defined tokens (what parse_special recognises), longest text first.
  const std::vector<int32_t>& special_ids() const { return special_ids_; }
  // How many times Encode ran (any thread): what tests count to show a request's prompt is
  // encoded once per model.
  int64_t encode_calls() const { return encode_calls_.load(std::memory_order_relaxed); }

 private:
  explicit Tokenizer(Vocab vocab);
  Status Init();
  void EncodeText(std::string_view text, bool first_fragment, std::vector<int32_t>* out) const;
  void EncodeSpm(std::string_view text, std::vector<int32_t>* out) const;
  void EncodeBpeWord(std::string_view word, std::vector<int32_t>* out) const;

  // Transparent hashing: lookups by string_view, no temporary std::string per candidate.
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  Vocab vocab_;
  std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> token_to_id_;
  // BPE: (left id << 32 | right id) -> (rank << 32 | merged id)
  std::unordered_map<uint64_t, uint64_t> merges_;
  int32_t byte_tokens_[256];  // SPM: id of "<0xXX>"; BPE: id of the byte's mapped char
  std::vector<int32_t> special_ids_;  // control/user-defined tokens, longest text first
  mutable std::atomic<int64_t> encode_calls_{0};
  std::unique_ptr<PreTokenizer> pre_;
};

}  // namespace tarmac::tok
