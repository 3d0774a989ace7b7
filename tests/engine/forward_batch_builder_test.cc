// BuildForwardBatch (engine/forward_batch_builder.h) on plain data: the tokens, positions,
// slots, logits rows and token-tree fields of the batch, and the prefill tokens it reports.
#include <gtest/gtest.h>

#include <vector>

#include "engine/forward_batch_builder.h"
#include "tensor/kv_layout.h"

namespace tarmac::engine {
namespace {

constexpr int32_t kBs = 4;

sched::ScheduledSeq Seq(int64_t id, int32_t start, int32_t num_tokens, bool sample, int32_t num_draft,
                        const std::vector<int32_t>* tokens, const std::vector<int32_t>* table) {
  return {id, start, num_tokens, sample, num_draft, tokens, table};
}

std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> v;
  for (int32_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

TEST(BuildForwardBatch, PrefillChunkThenDecode) {
  const std::vector<int32_t> toks_a = {50, 51, 52, 53, 54, 55}, table_a = {9, 3};
  const std::vector<int32_t> toks_b = {60, 61, 62, 63, 64, 65, 66}, table_b = {1, 7};
  const std::vector<sched::ScheduledSeq> seqs = {
      Seq(1, 0, 6, true, 0, &toks_a, &table_a),  // a whole prompt: prefill
      Seq(2, 6, 1, true, 0, &toks_b, &table_b),  // one decode past a 6-token prompt
  };
  const std::vector<BatchSeq> extra = {{.prompt_len = 6}, {.prompt_len = 6}};
  model::ForwardBatch b;
  std::vector<SeqRows> rows;
  EXPECT_EQ(BuildForwardBatch(seqs, extra, kBs, &b, &rows), 6);
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{50, 51, 52, 53, 54, 55, 66}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.seq, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(b.slots, (std::vector<int64_t>{36, 37, 38, 39, 12, 13, 7 * kBs + 2}));
  for (int32_t t = 0; t < 6; ++t) EXPECT_EQ(b.slots[t], SlotOf(table_a, t, kBs));
  EXPECT_EQ(b.block_tables, (std::vector<std::vector<int32_t>>{table_a, table_b}));
  EXPECT_EQ(b.logits_for, (std::vector<int32_t>{5, 6}));  // each sequence's last token
  EXPECT_FALSE(b.has_trees());
  EXPECT_TRUE(b.tree_begin.empty());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].begin, 0);
  EXPECT_EQ(rows[0].count, 1);
  EXPECT_EQ(rows[0].prompt, 0);
  EXPECT_EQ(rows[0].first_token, 0);
  EXPECT_EQ(rows[1].begin, 1);
  EXPECT_EQ(rows[1].count, 1);
  EXPECT_EQ(rows[1].first_token, 6);
}

TEST(BuildForwardBatch, ChunkThatDoesNotSampleAsksForNoLogits) {
  const std::vector<int32_t> toks = Range(100, 120), table = {0, 1, 2, 3, 4};
  const std::vector<sched::ScheduledSeq> seqs = {Seq(1, 4, 8, false, 0, &toks, &table)};
  const std::vector<BatchSeq> extra = {{.prompt_len = 20}};
  model::ForwardBatch b;
  std::vector<SeqRows> rows;
  EXPECT_EQ(BuildForwardBatch(seqs, extra, kBs, &b, &rows), 8);
  EXPECT_EQ(b.tokens, Range(104, 112));
  EXPECT_EQ(b.positions, Range(4, 12));
  EXPECT_TRUE(b.logits_for.empty());
  EXPECT_EQ(rows[0].count, 0);
}

TEST(BuildForwardBatch, PromptLogprobRowsOnlyWhereNotCapturedYet) {
  const std::vector<int32_t> toks = Range(10, 16), table = {0, 1};
  const std::vector<sched::ScheduledSeq> seqs = {Seq(1, 0, 6, true, 0, &toks, &table)};
  model::ForwardBatch b;
  std::vector<SeqRows> rows;
  // Fresh: every prompt position but the last predicts a prompt token; the last one samples.
  std::vector<BatchSeq> extra = {{.prompt_len = 6, .prompt_logprobs = 0, .prompt_lp_next = 1}};
  BuildForwardBatch(seqs, extra, kBs, &b, &rows);
  EXPECT_EQ(b.logits_for, Range(0, 6));
  EXPECT_EQ(rows[0].prompt, 5);
  EXPECT_EQ(rows[0].count, 6);
  // Back from preemption with the logprobs of positions 1..3 captured: only the rest.
  extra[0].prompt_lp_next = 4;
  BuildForwardBatch(seqs, extra, kBs, &b, &rows);
  EXPECT_EQ(b.logits_for, (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(rows[0].prompt, 2);
  EXPECT_EQ(rows[0].count, 3);
  // Logprobs not wanted: the sample row alone.
  extra[0].prompt_logprobs = -1;
  BuildForwardBatch(seqs, extra, kBs, &b, &rows);
  EXPECT_EQ(b.logits_for, (std::vector<int32_t>{5}));
  EXPECT_EQ(rows[0].prompt, 0);
}

TEST(BuildForwardBatch, ChainDraftsAreADecodeWithoutTreeFields) {
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5}, table = {6, 2};
  speculative::TokenTree chain;
  chain.token = {40, 41};
  chain.parent = {-1, 0};
  chain.depth = {1, 2};
  chain.mask = {0b01, 0b11};
  chain.spine = 2;
  // The last known token (position 4) and two drafts after it.
  const std::vector<sched::ScheduledSeq> seqs = {Seq(1, 4, 3, true, 2, &toks, &table)};
  const std::vector<BatchSeq> extra = {{.tree = &chain, .prompt_len = 3}};
  model::ForwardBatch b;
  std::vector<SeqRows> rows;
  EXPECT_EQ(BuildForwardBatch(seqs, extra, kBs, &b, &rows), 0);
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{5, 40, 41}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(b.slots, (std::vector<int64_t>{8, 9, 10}));
  EXPECT_EQ(b.logits_for, (std::vector<int32_t>{0, 1, 2}));  // the known token's, one per draft
  EXPECT_FALSE(b.has_trees());
  EXPECT_EQ(rows[0].count, 3);
}

TEST(BuildForwardBatch, TreeNodesCarryRopePositionsAndMasks) {
  const std::vector<int32_t> toks_a = {1, 2, 3}, table_a = {0, 1};
  const std::vector<int32_t> toks_b = Range(20, 29), table_b = {4, 5, 6};
  // Spine 70 -> 71 and a sibling 72 of 70 (depth 1), laid out parents first.
  speculative::TokenTree tree;
  tree.token = {70, 71, 72};
  tree.parent = {-1, 0, -1};
  tree.depth = {1, 2, 1};
  tree.mask = {0b001, 0b011, 0b100};
  tree.spine = 2;
  const std::vector<sched::ScheduledSeq> seqs = {
      Seq(1, 2, 4, true, 3, &toks_a, &table_a),  // last known token at 2, three nodes at 3..5
      Seq(2, 5, 4, false, 0, &toks_b, &table_b), // a prefill chunk beside it
  };
  const std::vector<BatchSeq> extra = {{.tree = &tree, .prompt_len = 2}, {.prompt_len = 9}};
  model::ForwardBatch b;
  std::vector<SeqRows> rows;
  EXPECT_EQ(BuildForwardBatch(seqs, extra, kBs, &b, &rows), 4);
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{3, 70, 71, 72, 25, 26, 27, 28}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{2, 3, 4, 5, 5, 6, 7, 8}));
  ASSERT_TRUE(b.has_trees());
  EXPECT_EQ(b.tree_begin, (std::vector<int32_t>{3, -1}));
  // A node's RoPE position is the root's (2) plus its depth: siblings share one.
  EXPECT_EQ(b.rope_positions, (std::vector<int32_t>{2, 3, 4, 3, 5, 6, 7, 8}));
  EXPECT_EQ(b.tree_mask, (std::vector<uint64_t>{0, 0b001, 0b011, 0b100, 0, 0, 0, 0}));
  EXPECT_EQ(b.logits_for, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(rows[1].first_token, 4);
  EXPECT_EQ(rows[1].count, 0);
  for (int32_t t = 4; t < 8; ++t) EXPECT_EQ(b.slots[t], SlotOf(table_b, b.positions[t], kBs));
}

TEST(BuildForwardBatch, ReusesTheBatchFromTheLastStep) {
  const std::vector<int32_t> toks = Range(0, 8), table = {3, 1};
  model::ForwardBatch b;
  std::vector<SeqRows> rows;
  const std::vector<BatchSeq> extra = {{.prompt_len = 8}};
  BuildForwardBatch(std::vector<sched::ScheduledSeq>{Seq(1, 0, 8, true, 0, &toks, &table)}, extra, kBs, &b, &rows);
  BuildForwardBatch(std::vector<sched::ScheduledSeq>{Seq(2, 7, 1, true, 0, &toks, &table)}, extra, kBs, &b, &rows);
  EXPECT_EQ(b.n_tokens(), 1);
  EXPECT_EQ(b.block_tables.size(), 1u);
  EXPECT_EQ(b.logits_for, (std::vector<int32_t>{0}));
  EXPECT_EQ(rows.size(), 1u);
}

}  // namespace
}  // namespace tarmac::engine
