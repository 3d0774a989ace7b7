// Paged attention for one query token: reads K/V through a block table and keeps a running
// (online) softmax over tiles of one block, so the full score row is never materialised. The
// same kernel serves prefill chunks (each query token of a chunk calls it with its own causal
// length) and decode steps.
//
// Pure functions over views; write only `out`. Thread-safe.
#pragma once

#include <cstdint>

namespace tarmac::kernels {

// One layer's paged K/V memory, f16. For block b and KV head h, K rows are
//   k + (b * n_kv_heads + h) * block_size * head_dim   ([block_size][head_dim])
// and the same for v.
struct PagedKvView {
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int32_t n_kv_heads = 0;
  int32_t block_size = 0;
  int32_t head_dim = 0;

  const uint16_t* KRows(int32_t block, int32_t head) const {
    return k + (static_cast<int64_t>(block) * n_kv_heads + head) * block_size * head_dim;
  }
  const uint16_t* VRows(int32_t block, int32_t head) const {
    return v + (static_cast<int64_t>(block) * n_kv_heads + head) * block_size * head_dim;
  }
};

// out[h] = softmax_j(scale · q[h]·K[j]) · V[j] over context positions j in [0, n_ctx) of the
// sequence whose blocks are block_table[0 .. ceil(n_ctx / block_size)); query head h reads KV
// head h / (n_heads / n_kv_heads) (grouped-query attention).
// q: [n_heads][head_dim] f32; out: [n_heads][head_dim] f32 (must not alias q).
// Heads in [head_begin, head_end) only (for splitting work across threads).
// Preconditions: n_ctx >= 1; n_heads a multiple of kv.n_kv_heads; head_dim <= 512.
void PagedAttention(const float* q, int32_t n_heads, int32_t head_begin, int32_t head_end,
                    const PagedKvView& kv, const int32_t* block_table, int64_t n_ctx,
                    float scale, float* out);

// Reference: materialises all scores, exact softmax in double.
void PagedAttentionRef(const float* q, int32_t n_heads, const PagedKvView& kv,
                       const int32_t* block_table, int64_t n_ctx, float scale, float* out);

}  // namespace tarmac::kernels
