#include "kernels/quant_interleaved.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "tensor/quant_blocks.h"

namespace tarmac::kernels {

int64_t QuantInterleaved::PackedBytes(const MatrixView& w) {
  const int64_t groups = (w.rows + kRows - 1) / kRows;
  return groups * GroupStride(w.type, w.cols / 32);
}

std::unique_ptr<QuantInterleaved> QuantInterleaved::Pack(const MatrixView& w) {
  TARMAC_CHECK(Supports(w.type) && w.cols % 32 == 0 && w.rows >= 0);
  auto p = std::unique_ptr<QuantInterleaved>(new QuantInterleaved());
  p->type_ = w.type;
  p->rows_ = w.rows;
  p->cols_ = w.cols;
  p->nb_ = w.cols / 32;
  // Zeroed by Resize: padding rows get zero quants and zero scales. Huge pages: it is
  // streamed through once per decoded token.
  p->buf_.Resize(static_cast<size_t>(PackedBytes(w)), /*huge_pages=*/true);
  const int64_t qb = p->quant_bytes();
  const bool q8 = w.type == DType::kQ8_0;
  for (int64_t g = 0; g < p->groups(); ++g) {
    uint8_t* q = p->buf_.data() + g * p->group_stride();
    uint8_t* sc = q + p->nb_ * qb;
    const int64_t n = std::min(kRows, w.rows - g * kRows);
    for (int64_t b = 0; b < p->nb_; ++b, q += qb, sc += 2 * kRows) {
      for (int64_t r = 0; r < n; ++r) {
        const uint8_t* row = w.row(g * kRows + r);
        if (q8) {
          const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
          for (int s = 0; s < 8; ++s) {
            for (int t = 0; t < 4; ++t) {
              q[s * 64 + r * 4 + t] = static_cast<uint8_t>(blk.qs[4 * s + t] + 128);
            }
          }
          std::memcpy(sc + r * 2, &blk.d, 2);
        } else {
          const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
          for (int s = 0; s < 4; ++s) std::memcpy(q + s * 64 + r * 4, blk.qs + 4 * s, 4);
          std::memcpy(sc + r * 2, &blk.d, 2);
        }
      }
    }
  }
  return p;
}

bool QuantInterleaved::Matches(const MatrixView& w) const {
  return w.type == type_ && w.rows == rows_ && w.cols == cols_;
}

}  // namespace tarmac::kernels
