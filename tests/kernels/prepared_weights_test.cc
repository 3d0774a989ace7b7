// PreparedWeights: at every ISA level each matrix gets the copy the dispatch table wants for
// its dtype (or none), through a typed handle that refuses the wrong layout; products with the
// copies equal the int8 reference bit for bit (interleaved) or those without a copy within
// 1e-4 of the largest output (AMX split-bf16, ~f32 exact; F16 panels, exact; the kernels' own tests bound each
// path against its scalar reference); with release_source the interleaved copies replace
// their sources.
#include "kernels/prepared_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_int8.h"
#include "kernel_test_util.h"

namespace tarmac::kernels {
namespace {

using testing::RandomActivations;
using testing::RandomMatrix;

const DType kTypes[] = {DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kF32};

PreparedLayout Wanted(DType t) {
  if (WantsAmxCopy(t)) return PreparedLayout::kAmxSplit;
  if (WantsInterleavedCopy(t)) return PreparedLayout::kInterleaved;
  if (WantsPanelCopy(t)) return PreparedLayout::kF16Panels;
  return PreparedLayout::kNone;
}

struct Case {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

std::vector<Case> Matrices(std::mt19937& rng) {
  std::vector<Case> cs;
  for (DType t : kTypes) {
    const int64_t rows = 48, cols = 256;
    Case c{RandomMatrix(t, rows, cols, RowBytes(t, cols), rng), {}};
    cs.push_back(std::move(c));
    cs.back().view = MatrixView{t, cs.back().bytes.data(), rows, cols, RowBytes(t, cols)};
  }
  return cs;
}

// y = W x for n tokens, with whatever copy w carries.
std::vector<float> Product(const MatrixView& w, const std::vector<float>& x, int64_t n, ThreadPool* pool) {
  std::vector<float> y(static_cast<size_t>(n * w.rows));
  MatMul(w, x.data(), n, y.data(), pool);
  return y;
}

TEST(PreparedWeightsTest, EachMatrixGetsTheCopyItsKernelWantsAndProductsAgree) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  testing::ForEachIsa([&](const char* isa) {
    SCOPED_TRACE(isa);
    std::vector<Case> cs = Matrices(rng);
    std::vector<MatrixView> plain;
    std::vector<MatrixView*> views;
    for (Case& c : cs) {
      plain.push_back(c.view);
      views.push_back(&c.view);
    }
    PreparedWeights pw;
    pw.Prepare(views, {});
    int64_t amx = 0, interleaved = 0, panels = 0;
    for (size_t i = 0; i < cs.size(); ++i) {
      const MatrixView& w = cs[i].view;
      SCOPED_TRACE(DTypeName(w.type));
      ASSERT_EQ(w.prepared_layout(), Wanted(w.type));
      EXPECT_EQ(w.data, plain[i].data);  // kept: release_source is off
      // The typed handle answers only for its own layout.
      EXPECT_EQ(PreparedAs<AmxPackedMatrix>(w) != nullptr, Wanted(w.type) == PreparedLayout::kAmxSplit);
      EXPECT_EQ(PreparedAs<QuantInterleaved>(w) != nullptr, Wanted(w.type) == PreparedLayout::kInterleaved);
      if (const auto* a = PreparedAs<AmxPackedMatrix>(w)) {
        EXPECT_TRUE(a->Matches(w));
        amx += AmxPackedMatrix::PackedBytes(w);
      }
      if (const auto* q = PreparedAs<QuantInterleaved>(w)) {
        EXPECT_TRUE(q->Matches(w));
        interleaved += QuantInterleaved::PackedBytes(w);
      }
      if (const auto* p = PreparedAs<PanelPackedMatrix>(w)) {
        EXPECT_TRUE(p->Matches(w));
        EXPECT_EQ(p->panel_width(), MatMulPanelWidth());
        panels += PanelPackedMatrix::PackedBytes(w, p->panel_width());
      }
      for (int64_t n : {1, 8, 32}) {
        const auto x = RandomActivations(n * w.cols, rng);
        const auto with = Product(w, x, n, &pool);
        if (PreparedAs<QuantInterleaved>(w) != nullptr) {
          // Every int8 path, from the copy or not, sums like MatMulInt8Ref, bit for bit.
          std::vector<float> ref(with.size());
          MatMulInt8Ref(plain[i], x.data(), n, ref.data());
          ASSERT_EQ(with, ref) << "tokens " << n;
          continue;
        }
        const auto without = Product(plain[i], x, n, &pool);
        double scale = 0;
        for (float v : without) scale = std::max(scale, static_cast<double>(std::fabs(v)));
        for (size_t j = 0; j < with.size(); ++j)
          ASSERT_NEAR(with[j], without[j], 1e-4 * scale + 1e-6) << "tokens " << n << " at " << j;
      }
    }
    EXPECT_EQ(pw.amx_bytes(), amx);
    EXPECT_EQ(pw.interleaved_bytes(), interleaved);
    EXPECT_EQ(pw.panel_bytes(), panels);
  });
}

TEST(PreparedWeightsTest, ReleaseSourceLetsTheInterleavedCopyReplaceItsBytes) {
  if (!WantsInterleavedCopy(DType::kQ8_0)) GTEST_SKIP() << "no x86 int8 path at this level";
  std::mt19937 rng(6);
  std::vector<Case> cs = Matrices(rng);
  std::vector<MatrixView*> views;
  for (Case& c : cs) views.push_back(&c.view);
  std::vector<float> before, before_k;
  const auto x = RandomActivations(4 * 256, rng);
  for (const Case& c : cs) {
    if (c.view.type == DType::kQ8_0) before = Product(c.view, x, 4, nullptr);
    if (c.view.type == DType::kQ4_K) before_k = Product(c.view, x, 4, nullptr);
  }
  PreparedWeights pw;
  int reports = 0;
  pw.Prepare(views, {.release_source = true, .progress = [&](const std::string&, int64_t, int64_t) { ++reports; }});
  EXPECT_GT(reports, 0);
  for (const Case& c : cs) {
    SCOPED_TRACE(DTypeName(c.view.type));
    const bool replaced = c.view.prepared_layout() == PreparedLayout::kInterleaved ||
                          c.view.prepared_layout() == PreparedLayout::kF16Panels;
    EXPECT_EQ(c.view.data == nullptr, replaced);
    if (c.view.type == DType::kQ8_0 || c.view.type == DType::kQ4_K) {
      ASSERT_TRUE(replaced);
      // Read from the copy alone, same sums.
      EXPECT_EQ(Product(c.view, x, 4, nullptr), c.view.type == DType::kQ8_0 ? before : before_k);
    }
  }
}

// F16 with a panel copy (x86 without AMX): with release_source the copy replaces its source,
// every token count reads the copy alone (the sums of a copy kept beside its source, bit for
// bit), and DequantizeMatrixRow reads each row from the copy as it was in the source.
TEST(PreparedWeightsTest, ReleaseSourceLetsThePanelCopyReplaceItsBytes) {
  if (!WantsPanelCopy(DType::kF16)) GTEST_SKIP() << "no F16 panel copy at this level";
  std::mt19937 rng(7);
  std::vector<Case> kept = Matrices(rng), released = kept;
  std::vector<MatrixView*> kept_views, released_views;
  for (size_t i = 0; i < kept.size(); ++i) {
    released[i].view.data = released[i].bytes.data();
    kept_views.push_back(&kept[i].view);
    released_views.push_back(&released[i].view);
  }
  PreparedWeights with_source, without_source;
  with_source.Prepare(kept_views, {});
  without_source.Prepare(released_views, {.release_source = true});
  EXPECT_EQ(with_source.panel_bytes(), without_source.panel_bytes());
  EXPECT_GT(without_source.panel_bytes(), 0);
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept[i].view.type != DType::kF16) continue;
    const MatrixView& w = released[i].view;
    ASSERT_EQ(w.prepared_layout(), PreparedLayout::kF16Panels);
    EXPECT_EQ(w.data, nullptr);
    for (int64_t n : {1, 2, 3, 5, 17, 40}) {
      const auto x = RandomActivations(n * w.cols, rng);
      EXPECT_EQ(Product(w, x, n, nullptr), Product(kept[i].view, x, n, nullptr)) << "tokens " << n;
    }
    std::vector<float> row(w.cols), want(w.cols);
    for (int64_t r : {int64_t{0}, int64_t{17}, w.rows - 1}) {
      DequantizeMatrixRow(w, r, row.data());
      DequantizeMatrixRow(kept[i].view, r, want.data());  // from the source
      EXPECT_EQ(row, want) << "row " << r;
    }
  }
}

}  // namespace
}  // namespace tarmac::kernels
