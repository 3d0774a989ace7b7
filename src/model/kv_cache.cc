#include "model/kv_cache.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/ops.h"
#include "tensor/fp16.h"

namespace tarmac::model {

const char* KvDtypeName(KvDtype d) { return d == KvDtype::kF16 ? "f16" : "int8"; }

KvCache::KvCache(const KvShape& shape) : shape_(shape) {
  TARMAC_CHECK(shape.n_layers > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0 &&
               shape.block_size > 0 && shape.num_blocks > 0);
  const int64_t elems = 2ll * shape.n_layers * shape.num_blocks * shape.n_kv_heads *
                        shape.block_size * shape.head_dim;
  if (shape.dtype == KvDtype::kF16) {
    data_.Resize(static_cast<size_t>(elems) * 2, /*huge_pages=*/true, /*zero=*/false);
  } else {
    data_.Resize(static_cast<size_t>(elems), /*huge_pages=*/true, /*zero=*/false);
    scales_.assign(2ull * shape.n_layers * shape.num_blocks * shape.n_kv_heads, 0.0f);
  }
}

int64_t KvCache::Index(int kv, int32_t layer, int32_t block, int32_t head) const {
  TARMAC_DCHECK(layer >= 0 && layer < shape_.n_layers);
  TARMAC_DCHECK(block >= 0 && block < shape_.num_blocks);
  TARMAC_DCHECK(head >= 0 && head < shape_.n_kv_heads);
  const int64_t head_elems = static_cast<int64_t>(shape_.block_size) * shape_.head_dim;
  return (((static_cast<int64_t>(kv) * shape_.n_layers + layer) * shape_.num_blocks + block) *
              shape_.n_kv_heads + head) * head_elems;
}

uint16_t* KvCache::Ptr(int kv, int32_t layer, int32_t block, int32_t head) {
  TARMAC_DCHECK(shape_.dtype == KvDtype::kF16);
  return data_.as<uint16_t>() + Index(kv, layer, block, head);
}

kernels::PagedKvView KvCache::View(int32_t layer) const {
  kernels::PagedKvView v;
  v.n_kv_heads = shape_.n_kv_heads;
  v.block_size = shape_.block_size;
  v.head_dim = shape_.head_dim;
  if (shape_.dtype == KvDtype::kF16) {
    v.k = k(layer, 0, 0);
    v.v = this->v(layer, 0, 0);
  } else {
    auto* base = const_cast<AlignedBuffer&>(data_).as<int8_t>();
    v.k8 = base + Index(0, layer, 0, 0);
    v.v8 = base + Index(1, layer, 0, 0);
    const int64_t per_kv = static_cast<int64_t>(shape_.n_layers) * shape_.num_blocks * shape_.n_kv_heads;
    const int64_t per_layer = static_cast<int64_t>(shape_.num_blocks) * shape_.n_kv_heads;
    v.k_scale = scales_.data() + layer * per_layer;
    v.v_scale = scales_.data() + per_kv + layer * per_layer;
  }
  return v;
}

void KvCache::WriteInt8Row(int kv, int32_t layer, int32_t block, int32_t head, int32_t off,
                           const float* x) {
  const int32_t hd = shape_.head_dim, bs = shape_.block_size;
  int8_t* base = data_.as<int8_t>() + Index(kv, layer, block, head);
  // K is [head_dim][block_size] (element (j, d) at d * bs + j); V is [block_size][head_dim].
  const int64_t pos_stride = kv == 0 ? 1 : hd, dim_stride = kv == 0 ? bs : 1;
  float& scale = scales_[((static_cast<int64_t>(kv) * shape_.n_layers + layer) * shape_.num_blocks +
                          block) * shape_.n_kv_heads + head];
  float amax = 0.0f;
  for (int32_t d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(x[d]));
  const float needed = amax / 127.0f;
  if (off == 0) {
    scale = needed;
  } else if (needed > scale) {
    // Requantize the positions already stored so the whole block shares the larger scale.
    const float ratio = scale / needed;
    for (int32_t j = 0; j < off; ++j)
      for (int32_t d = 0; d < hd; ++d) {
        int8_t& q = base[j * pos_stride + d * dim_stride];
        q = static_cast<int8_t>(std::lrint(q * ratio));
      }
    scale = needed;
  }
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int32_t d = 0; d < hd; ++d) {
    const long q = std::lrint(x[d] * inv);
    base[off * pos_stride + d * dim_stride] = static_cast<int8_t>(std::clamp<long>(q, -127, 127));
  }
}

void KvCache::WriteToken(int32_t layer, int64_t slot, const float* k, const float* v) {
  const int32_t block = static_cast<int32_t>(slot / shape_.block_size);
  const int32_t off = static_cast<int32_t>(slot % shape_.block_size);
  const int64_t hd = shape_.head_dim, bs = shape_.block_size;
  for (int32_t h = 0; h < shape_.n_kv_heads; ++h) {
    if (shape_.dtype == KvDtype::kInt8) {
      WriteInt8Row(0, layer, block, h, off, k + h * hd);
      WriteInt8Row(1, layer, block, h, off, v + h * hd);
      continue;
    }
    // K column `off` of the transposed [head_dim][block_size] block.
    alignas(64) uint16_t kh[1024];
    const float* kr = k + h * hd;
    uint16_t* kcol = this->k(layer, block, h) + off;
    for (int64_t d0 = 0; d0 < hd; d0 += 1024) {
      const int64_t n = std::min<int64_t>(1024, hd - d0);
      kernels::ConvertF32ToF16(kr + d0, kh, n);
      for (int64_t d = 0; d < n; ++d) kcol[(d0 + d) * bs] = kh[d];
    }
    kernels::ConvertF32ToF16(v + h * hd, this->v(layer, block, h) + off * hd, hd);
  }
}

void KvCache::ReadToken(int32_t layer, int64_t slot, float* k, float* v) const {
  const int32_t block = static_cast<int32_t>(slot / shape_.block_size);
  const int32_t off = static_cast<int32_t>(slot % shape_.block_size);
  const int64_t hd = shape_.head_dim, bs = shape_.block_size;
  const kernels::PagedKvView view = View(layer);
  for (int32_t h = 0; h < shape_.n_kv_heads; ++h) {
    const int64_t base = view.RowOffset(block, h);
    for (int64_t d = 0; d < hd; ++d) {
      if (shape_.dtype == KvDtype::kInt8) {
        k[h * hd + d] = view.k8[base + d * bs + off] * view.KScale(block, h);
        v[h * hd + d] = view.v8[base + off * hd + d] * view.VScale(block, h);
      } else {
        k[h * hd + d] = F16ToF32(view.k[base + d * bs + off]);
        v[h * hd + d] = F16ToF32(view.v[base + off * hd + d]);
      }
    }
  }
}

void KvCache::CopyToken(int64_t from, int64_t to) {
  std::vector<float> k(static_cast<size_t>(shape_.n_kv_heads) * shape_.head_dim), v(k.size());
  for (int32_t il = 0; il < shape_.n_layers; ++il) {
    ReadToken(il, from, k.data(), v.data());
    WriteToken(il, to, k.data(), v.data());
  }
}

}  // namespace tarmac::model
