// KvCache: the K and V memory of one model (the model defines its layout; block ids and their
// lifecycle belong to kv::BlockPool), in fixed-size blocks addressed by block id
// (ids come from a BlockPool). Element type f16 (int8 with per-block scales comes later).
//
// Layout per layer, per block, per KV head: [block_size][head_dim] f16 for K and for V, so
// attention for one head streams contiguous rows block after block.
//   k(layer, block, head) -> uint16_t[block_size * head_dim]
// Owns the memory (one allocation). Writes go through WriteToken; reads through the raw
// pointers. Not thread-safe for writes to the same slot; distinct slots may be written from
// different threads.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/aligned_buffer.h"

namespace tarmac::model {

struct KvShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // tokens per block
  int32_t num_blocks = 0;

  // Bytes of K+V for one block across all layers.
  int64_t BytesPerBlock() const {
    return 2ll * n_layers * n_kv_heads * block_size * head_dim * 2 /* f16 */;
  }
};

class KvCache {
 public:
  // Preconditions: every field of shape > 0.
  explicit KvCache(const KvShape& shape);

  const KvShape& shape() const { return shape_; }

  // K/V of one (layer, block, kv head): block_size rows of head_dim f16 values.
  uint16_t* k(int32_t layer, int32_t block, int32_t head) { return Ptr(0, layer, block, head); }
  uint16_t* v(int32_t layer, int32_t block, int32_t head) { return Ptr(1, layer, block, head); }
  const uint16_t* k(int32_t layer, int32_t block, int32_t head) const {
    return const_cast<KvCache*>(this)->Ptr(0, layer, block, head);
  }
  const uint16_t* v(int32_t layer, int32_t block, int32_t head) const {
    return const_cast<KvCache*>(this)->Ptr(1, layer, block, head);
  }

  // Stores one token's K and V (each [n_kv_heads][head_dim] f32) at slot = block*bs + offset.
  void WriteToken(int32_t layer, int64_t slot, const float* k, const float* v);

 private:
  uint16_t* Ptr(int kv, int32_t layer, int32_t block, int32_t head);

  KvShape shape_;
  AlignedBuffer data_;  // [2][n_layers][num_blocks][n_kv_heads][block_size][head_dim] f16
};

}  // namespace tarmac::model
