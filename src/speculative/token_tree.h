// TokenTree: one request's draft tree in one step, laid out for the target's verify pass.
// TreeShape says what to draft; Build lays the proposer's drafts out: node i sits at
// position len + i of the request (len: its known tokens; the root is the last of them,
// computed in the same pass), the spine first (nodes 0..spine-1, node d at depth d + 1, the
// chain's drafts), then, per branching position d, the distinct sibling candidates that
// differ from the spine's token (leaves at depth d + 1). Parents come before children, so
// a kept prefix of the nodes is a tree, and the accepted path's spine part already sits where
// the sequence needs it (an accepted leaf is moved onto its spine sibling's position).
// Plain data.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "sampling/speculative.h"

namespace tarmac::speculative {

constexpr int kMaxWidth = 4;
constexpr int kMaxTreeNodes = 64;  // kernels::TreeMask's bits

// What one request drafts in a step: a spine of `depth` tokens (a chain when width or branch
// is 0), and `width` sibling candidates at each of its first `branch` positions.
struct TreeShape {
  int32_t depth = 0;  // 0: no speculation
  int32_t width = 0;
  int32_t branch = 0;
  int32_t WidthAt(int32_t d) const { return d < branch ? width : 0; }  // d: 0-based position
  // Tree tokens at most (independent draws may repeat, so a tree can have fewer).
  int32_t Nodes() const { return depth + width * std::min(branch, depth); }
  bool tree() const { return width > 0 && branch > 0 && depth > 0; }
  bool operator==(const TreeShape&) const = default;
};


struct TokenTree {
  std::vector<int32_t> token;   // [nodes]
  std::vector<int32_t> parent;  // [nodes]: -1 for the root's children
  std::vector<int32_t> depth;   // [nodes]: 1 for the root's children
  std::vector<uint64_t> mask;   // [nodes]: bit j set for ancestors j and the node itself
  std::vector<int32_t> width;   // [spine]: sibling candidates used at each spine position
  int32_t spine = 0;

  // drafts: the proposer's spine (alts at least shape.WidthAt(d) where d branches, else the
  // position is a chain). At most min(kMaxTreeNodes, max_nodes) nodes: positions whose
  // siblings do not all fit keep none, spine drafts beyond the room are cut.
  static TokenTree Build(std::span<const sampling::DraftToken> drafts, const TreeShape& shape,
                         int32_t max_nodes);
  int32_t size() const { return static_cast<int32_t>(token.size()); }
  // The candidates verified at spine position d (the spine's token, then the sibling draws
  // in draw order, repeats included: what VerifyCandidates needs).
  std::vector<int32_t> Candidates(std::span<const sampling::DraftToken> drafts, int32_t d) const;
  // The node holding `token` among the children at spine position d (the spine node d or a
  // leaf), -1 if none.
  int32_t Child(int32_t d, int32_t token) const;
};

}  // namespace tarmac::speculative
