// PanelPackedMatrix: the layout the header promises (element (r, k) at panel(r / width)
// [k · width + r % width], zero padding rows), and MatMulPanels reading the copy gives the same
// floats, bit for bit, as packing per call (same f16 values, same FMA order), over odd row
// counts (edge panels), K across the 512-wide K blocks, every micro-tile height, strided rows
// and thread counts, at every Highway target. A copy of another width is not read.
#include "kernels/panel_packed_matrix.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "tensor/aligned_buffer.h"

namespace tarmac::kernels {
namespace {

using testing::RandomActivations;
using testing::RandomMatrix;

MatrixView View(const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols, int64_t stride) {
  return MatrixView{DType::kF16, bytes.data(), rows, cols, stride};
}

TEST(PanelPackedMatrixTest, LayoutIsPanelsOfRowsInKOrderWithZeroPadding) {
  std::mt19937 rng(1);
  for (int64_t width : {8, 16, 32}) {
    const int64_t rows = 2 * width + 3, cols = 37, stride = RowBytes(DType::kF16, cols) + 6;
    const auto bytes = RandomMatrix(DType::kF16, rows, cols, stride, rng);
    const MatrixView w = View(bytes, rows, cols, stride);
    ThreadPool pool(2);
    const auto pk = PanelPackedMatrix::Pack(w, width, &pool);
    ASSERT_TRUE(pk->Matches(w));
    EXPECT_EQ(pk->layout(), PreparedLayout::kF16Panels);
    ASSERT_EQ(pk->panels(), 3);
    EXPECT_EQ(PanelPackedMatrix::PackedBytes(w, width), 3 * width * cols * 2);
    for (int64_t r = 0; r < 3 * width; ++r) {
      for (int64_t k = 0; k < cols; ++k) {
        uint16_t want = 0;
        if (r < rows) std::memcpy(&want, w.row(r) + 2 * k, 2);
        ASSERT_EQ(pk->panel(r / width)[k * width + r % width], want) << "r " << r << " k " << k;
      }
    }
  }
}

// Both ways of reading the copy: in place (few token tiles) and converted once per K block
// (110 tokens: more than matmul.cc's kInPlaceTiles tiles at every level).
TEST(PanelPackedMatrixTest, MatMulPanelsFromTheCopyEqualsPackingPerCall) {
  std::mt19937 rng(2);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  int i = 0, read_copy = 0;
  testing::ForEachTarget([&](const char* target) {
    SCOPED_TRACE(target);
    const int64_t width = MatMulPanelWidth();
    for (int64_t cols : {1, 7, 300, 513, 1100}) {
      for (int64_t rows : {1, 3, 17, 33, 130}) {
        const int64_t stride = RowBytes(DType::kF16, cols) + (i % 2 == 0 ? 0 : 10);
        const auto bytes = RandomMatrix(DType::kF16, rows, cols, stride, rng);
        const MatrixView plain = View(bytes, rows, cols, stride);
        const auto pk = PanelPackedMatrix::Pack(plain, width, nullptr);
        MatrixView copied = plain;
        copied.prepared = pk.get();
        const auto other = PanelPackedMatrix::Pack(plain, width * 2, nullptr);
        MatrixView wrong_width = plain;
        wrong_width.prepared = other.get();
        for (int64_t tokens : {1, 2, 5, 6, 7, 13, 33, 110}) {
          if (rows * cols * tokens > 2'000'000) continue;
          const auto x = RandomActivations(tokens * cols, rng);
          std::vector<float> want(tokens * rows), got(tokens * rows, NAN),
              got_other(tokens * rows, NAN);
          ThreadPool* pool = pools[i++ % 3];
          MatMulPanels(plain, x.data(), tokens, want.data(), pool);
          MatMulPanels(copied, x.data(), tokens, got.data(), pool);
          MatMulPanels(wrong_width, x.data(), tokens, got_other.data(), pool);
          ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0)
              << "rows " << rows << " cols " << cols << " tokens " << tokens;
          ASSERT_EQ(std::memcmp(got_other.data(), want.data(), want.size() * 4), 0)
              << "rows " << rows << " cols " << cols << " tokens " << tokens;
        }
        ++read_copy;
      }
    }
  });
  EXPECT_GT(read_copy, 0);
}

// The copy is what MatMulPanels reads where the dispatch table wants one: a changed value in
// the copy changes the product.
TEST(PanelPackedMatrixTest, MatMulPanelsReadsTheCopy) {
  int levels = 0;
  testing::ForEachIsa([&](const char* isa) {
    if (!WantsPanelCopy(DType::kF16)) return;
    SCOPED_TRACE(isa);
    ++levels;
    std::mt19937 rng(3);
    const int64_t rows = 40, cols = 96, tokens = 20;
    const auto bytes = RandomMatrix(DType::kF16, rows, cols, RowBytes(DType::kF16, cols), rng);
    const MatrixView plain = View(bytes, rows, cols, RowBytes(DType::kF16, cols));
    const int64_t width = MatMulPanelWidth();
    AlignedBuffer storage(PanelPackedMatrix::PackedBytes(plain, width));
    const auto pk = PanelPackedMatrix::Pack(plain, width, nullptr, storage.data());
    MatrixView copied = plain;
    copied.prepared = pk.get();
    const auto x = RandomActivations(tokens * cols, rng);
    std::vector<float> want(tokens * rows), got(tokens * rows);
    MatMulPanels(plain, x.data(), tokens, want.data(), nullptr);
    storage.as<uint16_t>()[5 * width + 3] ^= 0x4000;  // row 3, k 5: a different value
    MatMulPanels(copied, x.data(), tokens, got.data(), nullptr);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        if (r == 3) {
          EXPECT_NE(got[t * rows + r], want[t * rows + r]) << "t " << t;
        } else {
          EXPECT_EQ(got[t * rows + r], want[t * rows + r]) << "t " << t << " r " << r;
        }
      }
    }
  });
  if (levels == 0) GTEST_SKIP() << "no level with an F16 panel copy on this CPU";
}

TEST(PanelPackedMatrixTest, WantedForF16WithoutAmxOnly) {
  for (Isa isa : kAllIsas) {
    SCOPED_TRACE(IsaName(isa));
    for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0, DType::kQ6_K}) {
      EXPECT_FALSE(WantsPanelCopy(t, isa)) << DTypeName(t);
    }
    const Isa level = std::min(isa, NativeIsa());
    const bool want = Cpu().x86 && level >= Isa::kAvx2 && level < Isa::kAmx;
    EXPECT_EQ(WantsPanelCopy(DType::kF16, isa), want);
  }
}

}  // namespace
}  // namespace tarmac::kernels
