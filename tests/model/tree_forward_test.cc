// A token tree through the whole model (tree positions in the KV, RoPE at the root's
// position + depth, tree masks): every node's logits equal those of its root-to-node path
// run as its own sequence; a plain sequence batched beside the tree is unaffected.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "model/llama_model.h"

namespace tarmac::model {
namespace {

constexpr int32_t kBs = 16;

void Add(ForwardBatch* b, int32_t seq, const std::vector<int32_t>& blocks, int32_t token, int32_t pos,
         bool logits) {
  if (logits) b->logits_for.push_back(b->n_tokens());
  b->tokens.push_back(token);
  b->positions.push_back(pos);
  b->seq.push_back(seq);
  b->slots.push_back(static_cast<int64_t>(blocks[pos / kBs]) * kBs + pos % kBs);
}

TEST(TreeForwardTest, NodesMatchTheirPathsAsSequences) {
  auto model = LlamaModel::Load(TARMAC_SOURCE_DIR "/models/wp-11m-f16.gguf");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  LlamaModel& m = **model;
  const ModelConfig& c = m.config();
  ThreadPool pool(2);
  const KvShape shape{c.n_layer, c.n_head_kv, c.head_dim, kBs, 24};
  const std::vector<int32_t> ctx = {1067, 565, 44, 396, 331, 10, 652, 274, 258, 430,
                                    279, 306, 290, 260, 742, 1302, 44, 276, 314, 283};
  const std::vector<int32_t> other = {359, 1075, 44, 974, 316};
  // Tree: parents before children; 0-1-2-3 the spine, then siblings at depths 1, 2 and 3,
  // and a deeper branch off a sibling.
  const std::vector<int32_t> parent = {-1, 0, 1, 2, -1, -1, 0, 1, 5};
  std::mt19937 rng(9);
  std::vector<int32_t> tok, depth;
  std::vector<uint64_t> mask;
  for (size_t i = 0; i < parent.size(); ++i) {
    tok.push_back(static_cast<int32_t>(rng() % c.n_vocab));
    depth.push_back(parent[i] < 0 ? 1 : depth[parent[i]] + 1);
    mask.push_back((parent[i] < 0 ? 0 : mask[parent[i]]) | (uint64_t{1} << i));
  }
  const int32_t n = static_cast<int32_t>(ctx.size());
  KvCache cache(shape);
  const std::vector<int32_t> tb = {3, 0, 5}, ob = {7, 1};
  ForwardBatch pre;
  pre.block_tables = {tb, ob};
  for (int32_t p = 0; p + 1 < n; ++p) Add(&pre, 0, tb, ctx[p], p, false);
  for (int32_t p = 0; p + 1 < static_cast<int32_t>(other.size()); ++p) Add(&pre, 1, ob, other[p], p, false);
  std::vector<float> logits;
  m.Forward(pre, &cache, &pool, &logits);
  // The verify pass: the root (the context's last token) and the tree; the other sequence's
  // last token beside it.
  ForwardBatch b;
  b.block_tables = {tb, ob};
  b.tree_begin = {n, -1};
  Add(&b, 0, tb, ctx[n - 1], n - 1, true);
  b.rope_positions.push_back(n - 1);
  b.tree_mask.push_back(0);
  for (size_t i = 0; i < tok.size(); ++i) {
    Add(&b, 0, tb, tok[i], n + static_cast<int32_t>(i), true);
    b.rope_positions.push_back(n - 1 + depth[i]);
    b.tree_mask.push_back(mask[i]);
  }
  const int32_t op = static_cast<int32_t>(other.size()) - 1;
  Add(&b, 1, ob, other[op], op, true);
  b.rope_positions.push_back(op);
  b.tree_mask.push_back(0);
  std::vector<float> tree_logits;
  m.Forward(b, &cache, &pool, &tree_logits);

  auto expect_row = [&](int32_t got_row, const std::vector<float>& want, int32_t want_row, const char* what) {
    for (int32_t v = 0; v < c.n_vocab; ++v) {
      const float w = want[static_cast<size_t>(want_row) * c.n_vocab + v];
      ASSERT_NEAR(tree_logits[static_cast<size_t>(got_row) * c.n_vocab + v], w, 1e-3 + 1e-4 * std::fabs(w))
          << what << " row " << got_row << " vocab " << v;
    }
  };
  // Each node: its path appended to the context, one plain sequence in a fresh cache.
  for (size_t i = 0; i < tok.size(); ++i) {
    std::vector<int32_t> seq = ctx;
    std::vector<int32_t> path;
    for (int32_t x = static_cast<int32_t>(i); x >= 0; x = parent[x]) path.insert(path.begin(), tok[x]);
    seq.insert(seq.end(), path.begin(), path.end());
    KvCache alone(shape);
    ForwardBatch a;
    a.block_tables = {{2, 4}};
    for (int32_t p = 0; p < static_cast<int32_t>(seq.size()); ++p) Add(&a, 0, a.block_tables[0], seq[p], p, true);
    std::vector<float> want;
    m.Forward(a, &alone, &pool, &want);
    expect_row(1 + static_cast<int32_t>(i), want, static_cast<int32_t>(seq.size()) - 1, "node");
    if (i == 0) expect_row(0, want, n - 1, "root");
  }
  KvCache alone(shape);
  ForwardBatch a;
  a.block_tables = {ob};
  for (int32_t p = 0; p <= op; ++p) Add(&a, 0, ob, other[p], p, true);
  std::vector<float> want;
  m.Forward(a, &alone, &pool, &want);
  expect_row(1 + static_cast<int32_t>(tok.size()), want, op, "plain sequence");
}

}  // namespace
}  // namespace tarmac::model
