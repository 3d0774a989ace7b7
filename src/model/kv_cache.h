// KvCache: the K and V memory of one model (the model defines its layout; block ids and their
// lifecycle belong to kv::BlockPool), in fixed-size blocks addressed by block id
// (ids come from a BlockPool). Element type f16, or int8 with one f32 scale per (block, head)
// for K and for V (half the memory).
//
// Layout per layer, per block, per KV head: K as [head_dim][block_size] (transposed, so the
// scores of a block's keys are vector FMAs over dims) and V as [block_size][head_dim] (rows, as
// the weighted sum wants); see kernels::PagedKvView.
//   k(layer, block, head) -> uint16_t[head_dim * block_size]   (f16)
// int8 scales: a block's scale is set by its first row (offset 0, always the first written:
// sequences fill blocks in order) as max|x| / 127, and grows when a later row has a larger
// max|x|: the rows already stored are requantized to the new scale (double rounding, at most
// one extra half step each time the scale grows).
// Owns the memory (one allocation, not zeroed: a page is first touched by the first write to
// it, so a cache sized for the whole budget costs neither start-up time nor resident memory
// until it is used; advised for transparent huge pages, as decode steps read blocks scattered
// over the whole pool and 4 KiB pages made nearly every block a TLB miss). A position holds garbage until written; readers read written positions
// only (the kernels mask a block's unwritten lanes, as they must for a reused block's stale
// ones). Writes go through WriteToken; reads through the raw pointers. Not thread-safe for writes to the same slot; distinct slots may be written from
// different threads.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "model/kv_dtype.h"
#include "tensor/kv_layout.h"
#include "tensor/aligned_buffer.h"

namespace tarmac::model {

struct KvShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = kDefaultBlockSize;  // tokens per block
  int32_t num_blocks = 0;
  KvDtype dtype = KvDtype::kF16;

  // Bytes of K+V for one block across all layers (int8: elements plus the scales).
  int64_t BytesPerBlock() const {
    const int64_t rows = 2ll * n_layers * n_kv_heads;
    return dtype == KvDtype::kF16 ? rows * block_size * head_dim * 2
                                  : rows * (block_size * head_dim + 4);
  }
};

class KvCache {
 public:
  // Preconditions: every field of shape > 0.
  explicit KvCache(const KvShape& shape);

  const KvShape& shape() const { return shape_; }

  // The view attention reads for one layer.
  kernels::PagedKvView View(int32_t layer) const;

  // f16 only. K ([head_dim][block_size]) / V ([block_size][head_dim]) of one (layer, block,
  // kv head).
  uint16_t* k(int32_t layer, int32_t block, int32_t head) { return Ptr(0, layer, block, head); }
  uint16_t* v(int32_t layer, int32_t block, int32_t head) { return Ptr(1, layer, block, head); }
  const uint16_t* k(int32_t layer, int32_t block, int32_t head) const {
    return const_cast<KvCache*>(this)->Ptr(0, layer, block, head);
  }
  const uint16_t* v(int32_t layer, int32_t block, int32_t head) const {
    return const_cast<KvCache*>(this)->Ptr(1, layer, block, head);
  }

  // Stores one token's K and V (each [n_kv_heads][head_dim] f32) at slot = block*bs + offset.
  // int8: rows of one block must be written in offset order (offset 0 first) from one thread.
  void WriteToken(int32_t layer, int64_t slot, const float* k, const float* v);
  // One token's K and V at `slot` of one layer, as f32 ([n_kv_heads][head_dim] each).
  void ReadToken(int32_t layer, int64_t slot, float* k, float* v) const;
  // Copies slot `from`'s K and V in every layer to slot `to` (a verified tree node moves to
  // the position its accepted path gives it), through WriteToken (int8: into the
  // destination block's scale). Preconditions: as WriteToken's for `to`.
  void CopyToken(int64_t from, int64_t to);

 private:
  uint16_t* Ptr(int kv, int32_t layer, int32_t block, int32_t head);
  int64_t Index(int kv, int32_t layer, int32_t block, int32_t head) const;  // element index
  void WriteInt8Row(int kv, int32_t layer, int32_t block, int32_t head, int32_t off,
                    const float* x);

  KvShape shape_;
  // [2][n_layers][num_blocks][n_kv_heads][block_size][head_dim], f16 or int8 elements
  AlignedBuffer data_;
  std::vector<float> scales_;  // int8: [2][n_layers][num_blocks][n_kv_heads]
};

}  // namespace tarmac::model
