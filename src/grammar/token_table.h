// TokenTable: a vocabulary as the grammar matcher sees it: each token's output bytes, the
// tokens sorted by those bytes (so tokens sharing a prefix are contiguous and one rejected
// prefix rejects a whole run), and which tokens end generation.
//
// Tokens fall in three groups: end-of-generation (eos, eot: allowed exactly where the grammar
// can end), text tokens (normal, user-defined and byte tokens with a non-empty piece), and
// the rest (control, unused, unknown, empty pieces), which a constrained output never holds.
//
// Immutable after Build; one per vocabulary, shared by every grammar compiled against it and
// safe to use from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tarmac::grammar {

class TokenTable {
 public:
  static std::shared_ptr<const TokenTable> Build(const tok::Tokenizer& tokenizer);
  // For tests and tools: pieces[id] are the token bytes ("" excludes a token); eog_ids end
  // generation. Preconditions: eog ids in range; pieces shorter than 65536 bytes.
  static std::shared_ptr<const TokenTable> FromPieces(std::vector<std::string> pieces,
                                                      std::vector<int32_t> eog_ids);

  int32_t n_vocab() const { return static_cast<int32_t>(pieces_.size()); }
  // Bytes of token id ("" for tokens that are not text).
  std::string_view bytes(int32_t id) const { return pieces_[id]; }
  bool is_text(int32_t id) const { return (text_mask_[id >> 6] >> (id & 63)) & 1; }
  bool is_eog(int32_t id) const { return (eog_mask_[id >> 6] >> (id & 63)) & 1; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  // n_vocab bits, one per text token.
  const std::vector<uint64_t>& text_mask() const { return text_mask_; }

  // Text tokens in byte order: position i in [0, num_sorted()).
  int32_t num_sorted() const { return static_cast<int32_t>(sorted_ids_.size()); }
  int32_t max_token_bytes() const { return max_token_bytes_; }
  int32_t sorted_id(int32_t i) const { return sorted_ids_[i]; }
  std::string_view sorted_bytes(int32_t i) const {
    return {sorted_bytes_.data() + sorted_offset_[i], sorted_offset_[i + 1] - sorted_offset_[i]};
  }
  // Length of the common prefix of positions i-1 and i (0 for i == 0).
  int32_t lcp(int32_t i) const { return lcp_[i]; }
  // First position after i whose bytes do not start with the first depth+1 bytes of
  // position i. Preconditions: lcp(i) <= depth < sorted_bytes(i).size().
  int32_t SubtreeEnd(int32_t i, int32_t depth) const { return subtree_end_[subtree_offset_[i] + depth - lcp_[i]]; }

 private:
  TokenTable() = default;
  void Index();

  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_ids_;
  std::vector<uint64_t> text_mask_, eog_mask_;
  std::vector<int32_t> sorted_ids_;
  std::string sorted_bytes_;  // the sorted tokens' bytes back to back: walks read them in order
  std::vector<uint32_t> sorted_offset_;
  std::vector<uint16_t> lcp_;
  std::vector<uint32_t> subtree_offset_;
  std::vector<int32_t> subtree_end_;
  int32_t max_token_bytes_ = 0;
};

}  // namespace tarmac::grammar
