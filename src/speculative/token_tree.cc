#include "speculative/token_tree.h"

#include "base/check.h"

namespace tarmac::speculative {

TokenTree TokenTree::Build(std::span<const sampling::DraftToken> drafts, const TreeShape& shape,
                           int32_t max_nodes) {
  TokenTree t;
  max_nodes = std::min(max_nodes, kMaxTreeNodes);
  t.spine = std::min<int32_t>(static_cast<int32_t>(drafts.size()), std::min(shape.depth, max_nodes));
  for (int32_t d = 0; d < t.spine; ++d) {
    t.token.push_back(drafts[d].id);
    t.parent.push_back(d - 1);
    t.depth.push_back(d + 1);
    t.mask.push_back((d == 0 ? 0 : t.mask[d - 1]) | (uint64_t{1} << d));
  }
  t.width.assign(static_cast<size_t>(t.spine), 0);
  for (int32_t d = 0; d < t.spine; ++d) {
    const sampling::DraftToken& dr = drafts[d];
    const int32_t w = std::min<int32_t>(shape.WidthAt(d), static_cast<int32_t>(dr.alts.size()));
    std::vector<int32_t> leaves;
    for (int32_t i = 0; i < w; ++i) {
      const int32_t x = dr.alts[i];
      if (x != dr.id && std::find(leaves.begin(), leaves.end(), x) == leaves.end()) leaves.push_back(x);
    }
    if (w == 0 || t.size() + static_cast<int32_t>(leaves.size()) > max_nodes) continue;
    t.width[d] = w;
    const uint64_t above = d == 0 ? 0 : t.mask[d - 1];
    for (int32_t x : leaves) {
      const int32_t i = t.size();
      t.token.push_back(x);
      t.parent.push_back(d - 1);
      t.depth.push_back(d + 1);
      t.mask.push_back(above | (uint64_t{1} << i));
    }
  }
  return t;
}

std::vector<int32_t> TokenTree::Candidates(std::span<const sampling::DraftToken> drafts,
                                           int32_t d) const {
  TARMAC_CHECK(d >= 0 && d < spine);
  std::vector<int32_t> c = {token[d]};
  c.insert(c.end(), drafts[d].alts.begin(), drafts[d].alts.begin() + width[d]);
  return c;
}

int32_t TokenTree::Child(int32_t d, int32_t tok) const {
  if (token[d] == tok) return d;
  for (int32_t i = spine; i < size(); ++i)
    if (depth[i] == d + 1 && token[i] == tok) return i;
  return -1;
}

}  // namespace tarmac::speculative
