// Packing an F16 matrix into MatMulPanels' panel order (see panel_packed_matrix.h).

#include "kernels/panel_packed_matrix.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "tensor/fp16.h"

namespace tarmac::kernels {

int64_t PanelPackedMatrix::PackedBytes(const MatrixView& w, int64_t width) {
  TARMAC_CHECK(width >= 1);
  const int64_t panels = (w.rows + width - 1) / width;
  return panels * width * w.cols * static_cast<int64_t>(sizeof(uint16_t));
}

std::unique_ptr<PanelPackedMatrix> PanelPackedMatrix::Pack(const MatrixView& w, int64_t width,
                                                           ThreadPool* pool, void* storage) {
  TARMAC_CHECK(Supports(w.type));
  TARMAC_CHECK(width >= 1);
  TARMAC_CHECK(w.data != nullptr || w.rows == 0);
  TARMAC_CHECK(reinterpret_cast<uintptr_t>(storage) % AlignedBuffer::kAlign == 0);
  std::unique_ptr<PanelPackedMatrix> p(new PanelPackedMatrix());
  p->rows_ = w.rows;
  p->cols_ = w.cols;
  p->width_ = width;
  uint16_t* out = static_cast<uint16_t*>(storage);
  if (out == nullptr) {
    p->buf_.Resize(std::max<int64_t>(64, PackedBytes(w, width)), /*huge_pages=*/false,
                   /*zero=*/false);
    out = p->buf_.as<uint16_t>();
  }
  p->data_ = out;
  const int64_t K = w.cols;
  // Every element of every panel is written (zeros for the padding rows): storage need not be
  // zeroed. Rows are read in 64-column strips so the strip of a whole panel stays in L1.
  auto run = [&](int64_t p0, int64_t p1, int) {
    constexpr int64_t kStrip = 64;
    for (int64_t pi = p0; pi < p1; ++pi) {
      uint16_t* dst = out + pi * K * width;
      const int64_t r0 = pi * width, nr = std::min(width, w.rows - r0);
      if (nr < width) std::memset(dst, 0, static_cast<size_t>(K * width) * sizeof(uint16_t));
      for (int64_t k0 = 0; k0 < K; k0 += kStrip) {
        const int64_t k1 = std::min(K, k0 + kStrip);
        for (int64_t i = 0; i < nr; ++i) {
          const auto* src = reinterpret_cast<const uint16_t*>(w.row(r0 + i));
          for (int64_t k = k0; k < k1; ++k) dst[k * width + i] = src[k];
        }
      }
    }
  };
  const int64_t n = p->panels();
  if (pool == nullptr || pool->num_threads() == 1 || n < 2) {
    run(0, n, 0);
  } else {
    pool->ParallelFor(n, 1, run);
  }
  return p;
}

void PanelPackedMatrix::DequantizeRow(int64_t r, float* dst) const {
  TARMAC_CHECK(r >= 0 && r < rows_);
  const uint16_t* src = panel(r / width_) + r % width_;
  for (int64_t k = 0; k < cols_; ++k) dst[k] = F16ToF32(src[k * width_]);
}

bool PanelPackedMatrix::Matches(const MatrixView& w) const {
  return Supports(w.type) && w.rows == rows_ && w.cols == cols_;
}

}  // namespace tarmac::kernels
