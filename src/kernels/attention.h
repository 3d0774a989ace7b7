// Paged attention: queries read K/V through a block table, with a running (online) softmax
// over one block of keys at a time, so the full score matrix is never materialised. One kernel
// serves prefill chunks and decode steps: it takes a tile of consecutive query tokens of one
// sequence (a decode step is a tile of one), and every K/V block is converted from f16 once
// per tile and shared by all query heads of a KV group (grouped-query attention); a tile of
// one f16 token widens K/V in registers straight from the cache instead, with the same sums
// in the same order, so a token's result is bit-identical alone or in a tile (without a
// sliding window; the AMX tiles aside).
//
// Pure functions over views; write only `out`. Thread-safe (per-thread scratch).
#pragma once

#include <cmath>
#include <cstdint>

namespace tarmac::kernels {

// One layer's paged K/V memory, f16 or int8. For block b and KV head h, K is at
//   k + (b * n_kv_heads + h) * block_size * head_dim   as [head_dim][block_size] (transposed:
//   element (position j, dim d) at d * block_size + j, so scores of a block's keys are
//   vector FMAs over dims)
// and V at the same offset of v as [block_size][head_dim] (rows, as the weighted sum wants). int8 (k8/v8 set, k/v null): same layout in int8, and one f32 scale per
// (block, head): value = q * k_scale[b * n_kv_heads + h].
struct PagedKvView {
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int32_t n_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;
  const int8_t* k8 = nullptr;
  const int8_t* v8 = nullptr;
  const float* k_scale = nullptr;  // [num_blocks][n_kv_heads]
  const float* v_scale = nullptr;

  bool is_int8() const { return k8 != nullptr; }
  int64_t RowOffset(int32_t block, int32_t head) const {
    return (static_cast<int64_t>(block) * n_kv_heads + head) * block_size * head_dim;
  }
  float KScale(int32_t block, int32_t head) const {
    return k_scale[static_cast<int64_t>(block) * n_kv_heads + head];
  }
  float VScale(int32_t block, int32_t head) const {
    return v_scale[static_cast<int64_t>(block) * n_kv_heads + head];
  }

  const uint16_t* KRows(int32_t block, int32_t head) const {
    return k + (static_cast<int64_t>(block) * n_kv_heads + head) * block_size * head_dim;
  }
  const uint16_t* VRows(int32_t block, int32_t head) const {
    return v + (static_cast<int64_t>(block) * n_kv_heads + head) * block_size * head_dim;
  }
};

// What a model's attention adds to plain causal softmax(scale · q·k) (model/arch.h picks it
// per layer). The default is plain causal attention.
struct AttentionVariant {
  // > 0: sliding window: the token at position p sees only the keys at positions
  // (p - window, p] (llama.cpp's standard SWA: masked when p - key >= window). 0: all of [0, p].
  int32_t window = 0;
  // > 0: each score s = scale · q·k becomes softcap · tanh(s / softcap) before the softmax
  // (Gemma 2's attention logit soft-capping). 0: scores as they are.
  float softcap = 0.0f;
  // [n_heads] or null: attention sinks (gpt-oss), per head a logit that joins every softmax's
  // denominator (unscaled, uncapped) and contributes no value: out = sum_j e^(s_j) v_j /
  // (sum_j e^(s_j) + e^(sink)).
  const float* sinks = nullptr;

  // 1 / the softmax denominator of head h whose running max is m and sum of e^(s - m) is l.
  float InverseDenominator(int32_t h, float m, float l) const {
    return 1.0f / (sinks == nullptr ? l : l + std::exp(sinks[h] - m));
  }

  // The first position a token at position `pos` sees.
  int64_t FirstKey(int64_t pos) const {
    return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
  }
};

// Token trees (speculative verification): a tile's tokens may be nodes of a draft tree laid
// out at positions begin, begin + 1, ... (parents before children): token i then sees the
// keys before `begin` and, of the tree's keys, position begin + j only when bit j of bits[i]
// is set (its ancestors and itself). Tokens before `begin` are unaffected (the tree is in
// their future). Preconditions: begin >= 1 (a tree hangs off a context), at most 64 tree
// positions, no sliding window.
struct TreeMask {
  int64_t begin = 0;
  const uint64_t* bits = nullptr;  // [nq]: one mask per query token of the tile
};

// Query tile: nq consecutive tokens of one sequence at positions pos0 .. pos0 + nq - 1; token i
// attends to positions [variant.FirstKey(pos0 + i), pos0 + i] (causal, windowed). For every token i and every query head h of KV
// head `kv_head`'s group (h in [kv_head * G, (kv_head + 1) * G), G = n_heads / n_kv_heads):
//   out_i[h] = softmax_j(scale · q_i[h] · K[j]) · V[j]
// q: token i's heads at q + i * q_stride ([n_heads][head_dim] f32); out likewise with
// out_stride (must not alias q). block_table covers positions [0, pos0 + nq); the entries of
// blocks wholly before variant.FirstKey(pos0) are never read (a caller may have freed them).
// Preconditions: nq >= 1, pos0 >= 0, n_heads a multiple of kv.n_kv_heads, variant.window >= 0,
// variant.softcap >= 0.
void PagedAttentionTile(const float* q, int64_t q_stride, int32_t nq, int64_t pos0,
                        int32_t n_heads, int32_t kv_head, const PagedKvView& kv,
                        const int32_t* block_table, float scale, float* out,
                        int64_t out_stride, const AttentionVariant& variant = {},
                        const TreeMask* tree = nullptr);

// Reference for one query token (all heads) at position n_ctx - 1, attending to
// [variant.FirstKey(n_ctx - 1), n_ctx) (less the tree keys tree->bits[0] leaves out, when
// given): materialises all scores, exact softmax (and tanh) in double. q, out:
// [n_heads][head_dim]. Reads f16 or int8 K/V.
void PagedAttentionRef(const float* q, int32_t n_heads, const PagedKvView& kv,
                       const int32_t* block_table, int64_t n_ctx, float scale, float* out,
                       const AttentionVariant& variant = {}, const TreeMask* tree = nullptr);

}  // namespace tarmac::kernels
