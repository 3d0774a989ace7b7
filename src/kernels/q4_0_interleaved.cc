#include "kernels/q4_0_interleaved.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "tensor/quant_blocks.h"

namespace tarmac::kernels {

int64_t Q4_0Interleaved::PackedBytes(const MatrixView& w) {
  const int64_t groups = (w.rows + kRows - 1) / kRows;
  return groups * GroupStride(w.cols / kQK4_0);
}

std::unique_ptr<Q4_0Interleaved> Q4_0Interleaved::Pack(const MatrixView& w) {
  TARMAC_CHECK(w.type == DType::kQ4_0 && w.cols % kQK4_0 == 0 && w.rows >= 0);
  auto p = std::unique_ptr<Q4_0Interleaved>(new Q4_0Interleaved());
  p->rows_ = w.rows;
  p->cols_ = w.cols;
  p->nb_ = w.cols / kQK4_0;
  // Zeroed by Resize: padding rows get zero quants and zero scales. Huge pages: it is
  // streamed through once per decoded token.
  p->buf_.Resize(static_cast<size_t>(PackedBytes(w)), /*huge_pages=*/true);
  for (int64_t g = 0; g < p->groups(); ++g) {
    uint8_t* q = p->buf_.data() + g * p->group_stride();
    uint8_t* sc = q + p->nb_ * kQuantBytes;
    const int64_t n = std::min(kRows, w.rows - g * kRows);
    for (int64_t b = 0; b < p->nb_; ++b, q += kQuantBytes, sc += 2 * kRows) {
      for (int64_t r = 0; r < n; ++r) {
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(w.row(g * kRows + r))[b];
        for (int s = 0; s < 4; ++s) std::memcpy(q + s * 64 + r * 4, blk.qs + 4 * s, 4);
        std::memcpy(sc + r * 2, &blk.d, 2);
      }
    }
  }
  return p;
}

bool Q4_0Interleaved::Matches(const MatrixView& w) const {
  return w.type == DType::kQ4_0 && w.rows == rows_ && w.cols == cols_;
}

}  // namespace tarmac::kernels
