#include "grammar/token_table.h"

#include <algorithm>

#include "base/check.h"

namespace tarmac::grammar {

std::shared_ptr<const TokenTable> TokenTable::Build(const tok::Tokenizer& tokenizer) {
  const tok::Vocab& v = tokenizer.vocab();
  std::vector<std::string> pieces(tokenizer.n_vocab());
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    if (tokenizer.IsEndOfGeneration(id)) {
      eog.push_back(id);
      continue;
    }
    const tok::TokenType type = v.types.empty() ? tok::TokenType::kNormal : v.types[id];
    if (type == tok::TokenType::kControl || type == tok::TokenType::kUnused || id == v.unk_id) continue;
    pieces[id] = tokenizer.TokenToPiece(id);
  }
  return FromPieces(std::move(pieces), std::move(eog));
}

std::shared_ptr<const TokenTable> TokenTable::FromPieces(std::vector<std::string> pieces,
                                                        std::vector<int32_t> eog_ids) {
  std::shared_ptr<TokenTable> t(new TokenTable());
  t->pieces_ = std::move(pieces);
  const size_t words = (t->pieces_.size() + 63) / 64;
  t->text_mask_.assign(words, 0);
  t->eog_mask_.assign(words, 0);
  for (int32_t id : eog_ids) {
    TARMAC_CHECK(id >= 0 && id < t->n_vocab());
    t->pieces_[id].clear();
    t->eog_mask_[id >> 6] |= 1ull << (id & 63);
  }
  std::sort(eog_ids.begin(), eog_ids.end());
  eog_ids.erase(std::unique(eog_ids.begin(), eog_ids.end()), eog_ids.end());
  t->eog_ids_ = std::move(eog_ids);
  t->Index();
  return t;
}

// Sorted order, common prefixes, and for every trie node (a token position and a depth at
// which its prefix first appears) the end of the run of positions sharing that prefix.
void TokenTable::Index() {
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (pieces_[id].empty()) continue;
    TARMAC_CHECK(pieces_[id].size() < 65536);
    text_mask_[id >> 6] |= 1ull << (id & 63);
    sorted_ids_.push_back(id);
    max_token_bytes_ = std::max(max_token_bytes_, static_cast<int32_t>(pieces_[id].size()));
  }
  std::stable_sort(sorted_ids_.begin(), sorted_ids_.end(),
                   [&](int32_t a, int32_t b) { return pieces_[a] < pieces_[b]; });
  const int32_t n = num_sorted();
  sorted_offset_.assign(1, 0);
  for (int32_t id : sorted_ids_) {
    sorted_bytes_ += pieces_[id];
    sorted_offset_.push_back(static_cast<uint32_t>(sorted_bytes_.size()));
  }
  lcp_.assign(n, 0);
  subtree_offset_.assign(n + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    if (i > 0) {
      const std::string& a = pieces_[sorted_ids_[i - 1]];
      const std::string& b = pieces_[sorted_ids_[i]];
      size_t k = 0;
      while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
      lcp_[i] = static_cast<uint16_t>(k);
    }
    subtree_offset_[i + 1] = subtree_offset_[i] + static_cast<uint32_t>(pieces_[sorted_ids_[i]].size() - lcp_[i]);
  }
  subtree_end_.assign(subtree_offset_[n], n);
  // Open prefixes (position, depth) by increasing depth; position j closes every open prefix
  // at depth >= lcp(j).
  std::vector<std::pair<int32_t, int32_t>> open;
  for (int32_t j = 0; j <= n; ++j) {
    const int32_t l = j < n ? lcp_[j] : 0;
    while (!open.empty() && open.back().second >= l) {
      const auto [i, d] = open.back();
      subtree_end_[subtree_offset_[i] + d - lcp_[i]] = j;
      open.pop_back();
    }
    if (j == n) break;
    const int32_t len = static_cast<int32_t>(pieces_[sorted_ids_[j]].size());
    for (int32_t d = lcp_[j]; d < len; ++d) open.push_back({j, d});
  }
}

}  // namespace tarmac::grammar
