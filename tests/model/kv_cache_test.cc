// KvCache: the memory layout the attention kernels read (K transposed, V in rows, per layer,
// block and KV head), f16 and int8 round trips, and the pool on huge pages.
#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/aligned_buffer.h"
#include "tensor/fp16.h"

namespace tarmac::model {
namespace {

KvShape Shape(KvDtype dtype) { return KvShape{3, 2, 8, 4, 5, dtype}; }

// What WriteToken stores is where View says it is: K of (layer, block, head) as
// [head_dim][block_size], V as [block_size][head_dim].
TEST(KvCacheTest, WrittenTokensSitWhereTheViewSays) {
  const KvShape s = Shape(KvDtype::kF16);
  KvCache cache(s);
  std::vector<float> k(s.n_kv_heads * s.head_dim), v(k.size());
  for (int32_t layer = 0; layer < s.n_layers; ++layer) {
    for (int64_t slot : {int64_t{0}, int64_t{6}, int64_t{19}}) {
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = static_cast<float>(layer * 1000 + slot * 10) + static_cast<float>(i) / 8;
        v[i] = -k[i];
      }
      cache.WriteToken(layer, slot, k.data(), v.data());
      const kernels::PagedKvView view = cache.View(layer);
      const int32_t block = static_cast<int32_t>(slot / s.block_size);
      const int64_t off = slot % s.block_size;
      for (int32_t h = 0; h < s.n_kv_heads; ++h) {
        for (int32_t d = 0; d < s.head_dim; ++d) {
          const float want = k[h * s.head_dim + d];
          EXPECT_EQ(F16ToF32(view.KRows(block, h)[d * s.block_size + off]), F16ToF32(F32ToF16(want)));
          EXPECT_EQ(F16ToF32(view.VRows(block, h)[off * s.head_dim + d]), F16ToF32(F32ToF16(-want)));
        }
      }
      std::vector<float> rk(k.size()), rv(k.size());
      cache.ReadToken(layer, slot, rk.data(), rv.data());
      for (size_t i = 0; i < k.size(); ++i) {
        EXPECT_EQ(rk[i], F16ToF32(F32ToF16(k[i])));
        EXPECT_EQ(rv[i], F16ToF32(F32ToF16(v[i])));
      }
    }
  }
}

// Decode steps read K/V blocks scattered over the whole pool: on 4 KiB pages nearly every
// block is a TLB miss (bench/NOTES.md), so the pool is one huge-page-aligned allocation,
// advised for transparent huge pages, for both element types.
TEST(KvCacheTest, PoolIsOnHugePages) {
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kInt8}) {
    KvCache cache(Shape(dtype));
    const kernels::PagedKvView view = cache.View(0);
    const void* base = dtype == KvDtype::kF16 ? static_cast<const void*>(view.k)
                                              : static_cast<const void*>(view.k8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % AlignedBuffer::kHugePage, 0u) << KvDtypeName(dtype);
  }
}

}  // namespace
}  // namespace tarmac::model
