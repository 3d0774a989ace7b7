// The paged KV layout's arithmetic (tensor/kv_layout.h): blocks needed and the slot of a
// position, against the layout KvCache and the attention kernels read.
#include <gtest/gtest.h>

#include <vector>

#include "model/kv_cache.h"
#include "tensor/kv_layout.h"

namespace tarmac::model {
namespace {

TEST(KvLayout, BlocksForRoundsUp) {
  EXPECT_EQ(BlocksFor(0, 16), 0);
  EXPECT_EQ(BlocksFor(1, 16), 1);
  EXPECT_EQ(BlocksFor(16, 16), 1);
  EXPECT_EQ(BlocksFor(17, 16), 2);
  EXPECT_EQ(BlocksFor(32, 16), 2);
  EXPECT_EQ(BlocksFor(7, 1), 7);
  EXPECT_EQ(BlocksFor(int64_t{1} << 40, 16), int64_t{1} << 36);  // no 32-bit overflow
  static_assert(BlocksFor(33, 8) == 5);                            // usable in constant expressions
}

TEST(KvLayout, SlotIsBlockStartPlusOffset) {
  const std::vector<int32_t> table = {7, 2, 5};
  for (int32_t bs : {1, 4, 16}) {
    for (int32_t pos = 0; pos < 3 * bs; ++pos) {
      const int64_t slot = SlotOf(table, pos, bs);
      EXPECT_EQ(slot / bs, table[pos / bs]) << "bs " << bs << " pos " << pos;
      EXPECT_EQ(slot % bs, pos % bs) << "bs " << bs << " pos " << pos;
    }
  }
  EXPECT_EQ(SlotOf(table, 17, 16), 2 * 16 + 1);
}

TEST(KvLayout, IdentityTableMakesSlotThePosition) {
  const std::vector<int32_t> table = {0, 1, 2, 3};
  for (int32_t pos = 0; pos < 64; ++pos) EXPECT_EQ(SlotOf(table, pos, 16), pos);
}

TEST(KvLayout, SlotsAreDistinctAcrossSequences) {
  // Two sequences over disjoint blocks never write the same slot.
  const std::vector<int32_t> a = {0, 3}, b = {1, 2};
  for (int32_t i = 0; i < 8; ++i)
    for (int32_t j = 0; j < 8; ++j) EXPECT_NE(SlotOf(a, i, 4), SlotOf(b, j, 4));
}

TEST(KvLayout, LargeBlockIdsDoNotOverflow) {
  const std::vector<int32_t> table = {1 << 30};
  EXPECT_EQ(SlotOf(table, 3, 16), (int64_t{1} << 30) * 16 + 3);
}

TEST(KvLayout, KvShapeDefaultsToTheDefaultBlockSize) {
  EXPECT_EQ(KvShape{}.block_size, kDefaultBlockSize);
  EXPECT_GE(kDefaultBlockSize, 1);
}

}  // namespace
}  // namespace tarmac::model
