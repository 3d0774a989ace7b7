#include "model/kv_cache.h"

#include "base/check.h"
#include "kernels/ops.h"

namespace tarmac::model {

KvCache::KvCache(const KvShape& shape) : shape_(shape) {
  TARMAC_CHECK(shape.n_layers > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0 &&
               shape.block_size > 0 && shape.num_blocks > 0);
  data_.Resize(static_cast<size_t>(shape.BytesPerBlock()) * shape.num_blocks);
}

uint16_t* KvCache::Ptr(int kv, int32_t layer, int32_t block, int32_t head) {
  TARMAC_DCHECK(layer >= 0 && layer < shape_.n_layers);
  TARMAC_DCHECK(block >= 0 && block < shape_.num_blocks);
  TARMAC_DCHECK(head >= 0 && head < shape_.n_kv_heads);
  const int64_t head_elems = static_cast<int64_t>(shape_.block_size) * shape_.head_dim;
  const int64_t idx =
      (((static_cast<int64_t>(kv) * shape_.n_layers + layer) * shape_.num_blocks + block) *
           shape_.n_kv_heads + head) * head_elems;
  return data_.as<uint16_t>() + idx;
}

void KvCache::WriteToken(int32_t layer, int64_t slot, const float* k, const float* v) {
  const int32_t block = static_cast<int32_t>(slot / shape_.block_size);
  const int32_t off = static_cast<int32_t>(slot % shape_.block_size);
  for (int32_t h = 0; h < shape_.n_kv_heads; ++h) {
    kernels::ConvertF32ToF16(k + static_cast<int64_t>(h) * shape_.head_dim,
                             this->k(layer, block, h) + static_cast<int64_t>(off) * shape_.head_dim,
                             shape_.head_dim);
    kernels::ConvertF32ToF16(v + static_cast<int64_t>(h) * shape_.head_dim,
                             this->v(layer, block, h) + static_cast<int64_t>(off) * shape_.head_dim,
                             shape_.head_dim);
  }
}

}  // namespace tarmac::model
