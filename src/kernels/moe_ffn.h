// MoeFfn: a mixture-of-experts feed-forward block over a batch, given each token's chosen
// experts and their weights (the router is the model's: model/expert_router.h).
//
//   y[t] = sum over the token's choices j of weight[t][j] · down_e(act(gate_e · x[t]) ⊙ (up_e · x[t]))
//
// Expert-major: the tokens that chose an expert are gathered into one block and the expert runs
// MatMulGlu + MatMul over that block (the dispatch table's kernel for its dtype, token count
// and prepared copy), so at decode each expert in the batch's union is read once per call and
// multiplies only its own tokens, and at prefill each expert runs one GEMM over its group.
// Experts chosen by no token are not read. A token's terms are added in increasing expert
// order, so its result does not depend on which other tokens share the batch.
//
// Thread-safety: MoeFfn mutates only *scratch and y; one caller per scratch. The pool is
// borrowed (the MatMuls split each expert's rows over it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/ops.h"
#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// One MoE layer's experts: expert e is gate[e], up[e] ([ff x cols] each) and down[e]
// ([cols x ff]); every expert has the same shapes. Optional per-expert biases (gpt-oss):
// gate_bias/up_bias [n_expert][ff], down_bias [n_expert][cols], or null.
struct ExpertWeights {
  std::span<const MatrixView> gate, up, down;
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
  int64_t n_expert() const { return static_cast<int64_t>(gate.size()); }
  int64_t cols() const { return gate.empty() ? 0 : gate[0].cols; }
  int64_t ff() const { return gate.empty() ? 0 : gate[0].rows; }
};

// The tokens' choices: ids[t * k + j] in [0, n_expert), weights[t * k + j]; a token names an
// expert at most once.
struct ExpertChoices {
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
  int64_t k = 0;
};

// Buffers MoeFfn reuses between calls (grown, never shrunk: no allocation once warm).
struct MoeScratch {
  std::vector<int32_t> offsets;  // [n_expert + 1]: where each expert's slots begin in order
  std::vector<int32_t> order;    // [n_tokens * k]: slot indices (t * k + j) grouped by expert
  std::vector<int32_t> next;     // [n_expert]: the next free place of each expert's group
  AlignedVector<float> x, gate, up, out;  // [tokens of one expert][cols | ff | ff | cols]
};

// y: [n_tokens][cols], overwritten (must not alias x). x: [n_tokens][cols].
// Preconditions: every expert's matrices meet MatMul's; choices valid as above.
void MoeFfn(const ExpertWeights& w, const float* x, int64_t n_tokens, const ExpertChoices& c,
            GluKind glu, float* y, MoeScratch* scratch, ThreadPool* pool);

// Scalar reference: token by token with MatMulRef and the activation's scalar form.
void MoeFfnRef(const ExpertWeights& w, const float* x, int64_t n_tokens, const ExpertChoices& c,
               GluKind glu, float* y);

}  // namespace tarmac::kernels
