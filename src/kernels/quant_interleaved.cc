#include "kernels/quant_interleaved.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tarmac::kernels {

namespace {

constexpr int64_t kRows = QuantInterleaved::kRows;

using QI = QuantInterleaved;

// Row r of a group (grp: the group's first byte; see the header's layout).
void PackRowQ8_0(const uint8_t* row, int64_t nb, int64_t r, uint8_t* grp) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
    uint8_t* q = grp + QI::BlockOffset(DType::kQ8_0, b);
    for (int s = 0; s < 8; ++s) {
      uint32_t word;
      std::memcpy(&word, blk.qs + 4 * s, 4);
      word ^= 0x80808080u;  // int8 -> uint8 + 128
      std::memcpy(q + s * 64 + r * 4, &word, 4);
    }
    std::memcpy(grp + QI::ScalesOffset(DType::kQ8_0, b) + r * 2, &blk.d, 2);
  }
}

void PackRowQ4_0(const uint8_t* row, int64_t nb, int64_t r, uint8_t* grp) {
  for (int64_t b = 0; b < nb; ++b) {
    const auto& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
    uint8_t* q = grp + QI::BlockOffset(DType::kQ4_0, b);
    for (int s = 0; s < 4; ++s) std::memcpy(q + s * 64 + r * 4, blk.qs + 4 * s, 4);
    std::memcpy(grp + QI::ScalesOffset(DType::kQ4_0, b) + r * 2, &blk.d, 2);
  }
}

// Sub-block j's quants u[0..32) become Q4_0's pairs: byte k = u[k] | u[16 + k] << 4.
void PackRowQ4_K(const uint8_t* row, int64_t nsb, int64_t r, uint8_t* grp) {
  constexpr DType kT = DType::kQ4_K;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const auto& blk = reinterpret_cast<const BlockQ4_K*>(row)[sb];
    uint8_t* q = grp + QI::BlockOffset(kT, 8 * sb);
    uint8_t* sc = grp + QI::UnitScalesOffset(kT, sb);
    std::memcpy(sc + r * 2, &blk.d, 2);
    std::memcpy(sc + 32 + r * 2, &blk.dmin, 2);
    for (int j = 0; j < 8; ++j, q += 256) {
      Q4KScaleMin(j, blk.scales, sc + 64 + 16 * j + r, sc + 192 + 16 * j + r);
      const uint8_t* src = blk.qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      uint8_t pairs[16];
      for (int k = 0; k < 16; ++k) {
        pairs[k] = static_cast<uint8_t>(((src[k] >> shift) & 15) | (((src[16 + k] >> shift) & 15) << 4));
      }
      for (int s = 0; s < 4; ++s) std::memcpy(q + s * 64 + r * 4, pairs + 4 * s, 4);
    }
  }
}

}  // namespace

int64_t QuantInterleaved::PackedBytes(const MatrixView& w) {
  const int64_t groups = (w.rows + kRows - 1) / kRows;
  return groups * GroupStride(w.type, w.cols / 32);
}

std::unique_ptr<QuantInterleaved> QuantInterleaved::Pack(const MatrixView& w, ThreadPool* pool,
                                                        void* storage) {
  TARMAC_CHECK(Supports(w.type) && w.cols % Traits(w.type).block_size == 0 && w.rows >= 0);
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
  // Word-wise copies (4 weights at a time), groups in parallel. Packing time goes mostly to
  // first-touching the new memory, not to these copies (bench/NOTES.md).
  auto pack_groups = [&](int64_t g0, int64_t g1, int) {
    for (int64_t g = g0; g < g1; ++g) {
      uint8_t* grp = p->data_ + g * p->group_stride();
      std::memset(grp, 0, static_cast<size_t>(p->group_stride()));
      const int64_t n = std::min(kRows, w.rows - g * kRows);
      for (int64_t r = 0; r < n; ++r) {
        const uint8_t* row = w.row(g * kRows + r);
        switch (w.type) {
          case DType::kQ8_0: PackRowQ8_0(row, p->nb_, r, grp); break;
          case DType::kQ4_0: PackRowQ4_0(row, p->nb_, r, grp); break;
          default: PackRowQ4_K(row, p->nb_ / 8, r, grp); break;
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

void QuantInterleaved::block_scale_min(int64_t g, int64_t b, int64_t i, float* scale,
                                       float* min) const {
  TARMAC_DCHECK(type_ == DType::kQ4_K && i >= 0 && i < kRows && b >= 0 && b < nb_);
  const uint8_t* s = unit_scales(g, b / unit_blocks());
  uint16_t d, dmin;
  std::memcpy(&d, s + 2 * i, 2);
  std::memcpy(&dmin, s + 32 + 2 * i, 2);
  *scale = F16ToF32(d) * s[64 + 16 * (b % 8) + i];
  *min = F16ToF32(dmin) * s[192 + 16 * (b % 8) + i];
}

void QuantInterleaved::DequantizeRow(int64_t r, float* dst) const {
  TARMAC_CHECK(r >= 0 && r < rows_);
  const int64_t g = r / kRows, i = r % kRows;
  for (int64_t b = 0; b < nb_; ++b) {
    const uint8_t* q = block_quants(g, b) + i * 4;
    float* out = dst + b * 32;
    if (type_ == DType::kQ4_K) {  // as DequantizeRowRef: d1 · u - m1
      float d1, m1;
      block_scale_min(g, b, i, &d1, &m1);
      for (int k = 0; k < 16; ++k) {
        const uint8_t v = q[(k / 4) * 64 + k % 4];
        out[k] = d1 * static_cast<float>(v & 15) - m1;
        out[k + 16] = d1 * static_cast<float>(v >> 4) - m1;
      }
      continue;
    }
    const float d = F16ToF32(block_scales(g, b)[i]);
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
