// BuildForwardBatch: the model's side of one engine step. Turns the scheduler's output (which
// sequences compute which positions, drafts included) into the ForwardBatch the model runs
// (model/forward_batch.h: tokens, positions, KV slots, block tables, token trees, the rows of
// logits wanted) and records where each sequence's logits rows land.
//
// Pure: reads its inputs, writes only *batch and *rows (both reused across steps, so their
// capacity stays). Thread-safety: none needed beyond that of its arguments.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/forward_batch.h"
#include "sched/scheduler.h"
#include "speculative/token_tree.h"

namespace tarmac::engine {

// What the batch needs of one scheduled sequence beyond sched::ScheduledSeq: the request's side.
struct BatchSeq {
  // Its drafts laid out as a token tree (a chain is a tree without siblings), fitted into the
  // num_draft slots the scheduler gave it; null when num_draft == 0.
  const speculative::TokenTree* tree = nullptr;
  int32_t prompt_len = 0;        // tokens of its prompt
  int32_t prompt_logprobs = -1;  // >= 0: the logprobs of its prompt tokens are wanted
  int32_t prompt_lp_next = 1;    // the first prompt position whose logprobs are not captured yet
};

// Where one scheduled sequence's logits rows are.
struct SeqRows {
  int32_t begin = 0;        // its first row of the step's logits
  int32_t prompt = 0;       // of which prompt-logprob rows (then its sample rows)
  int32_t count = 0;        // its rows of the step's logits
  int32_t first_token = 0;  // its first token in the batch
};

// Fills *batch (cleared first) with seqs[i]'s tokens: its known tokens from `start`, then its
// tree's nodes (RoPE positions and masks go with the batch when any sequence has siblings);
// slots from its block table (tensor/kv_layout.h). Logits rows are asked for at prompt
// positions whose logprobs are wanted and not captured yet (a request back from preemption
// recomputes them, but has them), at the last known token when the sequence samples, and at
// every tree node. Returns the prefill tokens: those of sequences that are not one decode or
// one verification (the step's cost is priced against them).
// Preconditions: extra.size() == seqs.size(); extra[i].tree is set iff seqs[i].num_draft > 0,
// with at most num_draft nodes; every block table covers its sequence's positions.
int32_t BuildForwardBatch(std::span<const sched::ScheduledSeq> seqs, std::span<const BatchSeq> extra,
                          int32_t block_size, model::ForwardBatch* batch, std::vector<SeqRows>* rows);

}  // namespace tarmac::engine
