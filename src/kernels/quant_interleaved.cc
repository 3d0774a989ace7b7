#include "kernels/quant_interleaved.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tarmac::kernels {

int64_t QuantInterleaved::PackedBytes(const MatrixView& w) {
  const int64_t groups = (w.rows + kRows - 1) / kRows;
  return groups * GroupStride(w.type, w.cols / 32);
}

std::unique_ptr<QuantInterleaved> QuantInterleaved::Pack(const MatrixView& w, ThreadPool* pool,
                                                        void* storage) {
  TARMAC_CHECK(Supports(w.type) && w.cols % 32 == 0 && w.rows >= 0);
  TARMAC_CHECK(reinterpret_cast<uintptr_t>(storage) % AlignedBuffer::kAlign == 0);
  auto p = std::unique_ptr<QuantInterleaved>(new QuantInterleaved());
  p->type_ = w.type;
  p->rows_ = w.rows;
  p->cols_ = w.cols;
  p->nb_ = w.cols / 32;
  // Huge pages: it is streamed through once per decoded token. Not zeroed here: each group is
  // zeroed (padding rows: zero quants and zero scales) and filled by the thread that packs it,
  // so the first touch of the new memory is split over the pool and done once.
  p->data_ = static_cast<uint8_t*>(storage);
  if (p->data_ == nullptr) {
    p->buf_.Resize(static_cast<size_t>(PackedBytes(w)), /*huge_pages=*/true, /*zero=*/false);
    p->data_ = p->buf_.data();
  }
  const int64_t qb = p->quant_bytes();
  const bool q8 = w.type == DType::kQ8_0;
  // Word-wise copies (4 weights at a time), groups in parallel. Packing time goes mostly to
  // first-touching the new memory, not to these copies (bench/NOTES.md).
  auto pack_groups = [&](int64_t g0, int64_t g1, int) {
    for (int64_t g = g0; g < g1; ++g) {
      uint8_t* q = p->data_ + g * p->group_stride();
      std::memset(q, 0, static_cast<size_t>(p->group_stride()));
      uint8_t* sc = q + p->nb_ * qb;
      const int64_t n = std::min(kRows, w.rows - g * kRows);
      for (int64_t b = 0; b < p->nb_; ++b, q += qb, sc += 2 * kRows) {
        for (int64_t r = 0; r < n; ++r) {
          const uint8_t* row = w.row(g * kRows + r);
          uint32_t word;
          if (q8) {
            const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
            for (int s = 0; s < 8; ++s) {
              std::memcpy(&word, blk.qs + 4 * s, 4);
              word ^= 0x80808080u;  // int8 -> uint8 + 128
              std::memcpy(q + s * 64 + r * 4, &word, 4);
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
  };
  if (pool == nullptr || pool->num_threads() == 1) {
    pack_groups(0, p->groups(), 0);
  } else {
    pool->ParallelFor(p->groups(), 16, pack_groups);
  }
  return p;
}

void QuantInterleaved::DequantizeRow(int64_t r, float* dst) const {
  TARMAC_CHECK(r >= 0 && r < rows_);
  const int64_t g = r / kRows, i = r % kRows;
  const int64_t qb = quant_bytes();
  for (int64_t b = 0; b < nb_; ++b) {
    const float d = F16ToF32(scales(g)[b * kRows + i]);
    const uint8_t* q = quants(g) + b * qb + i * 4;
    float* out = dst + b * 32;
    if (type_ == DType::kQ8_0) {
      for (int k = 0; k < 32; ++k) out[k] = d * static_cast<float>(int{q[(k / 4) * 64 + k % 4]} - 128);
    } else {
      for (int k = 0; k < 16; ++k) {
        const uint8_t v = q[(k / 4) * 64 + k % 4];
        out[k] = d * static_cast<float>(int{v & 15} - 8);
        out[k + 16] = d * static_cast<float>(int{v >> 4} - 8);
      }
    }
  }
}

bool QuantInterleaved::Matches(const MatrixView& w) const {
  return w.type == type_ && w.rows == rows_ && w.cols == cols_;
}

}  // namespace tarmac::kernels
