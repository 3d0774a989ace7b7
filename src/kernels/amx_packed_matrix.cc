#include "kernels/amx_packed_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_amx_internal.h"
#include "kernels/matvec.h"
#include "tensor/fp16.h"

namespace tarmac::kernels {
namespace {

using amx_internal::kKStep;
using amx_internal::kRowBlock;
using amx_internal::StageWeightBlock;
using amx_internal::TransposeWeightTiles;

// The inverse, at Pack: hi/lo tiles of `steps` K steps (lo = v - hi of an f16 v, exact) ->
// nibbles. Checks that every lo is ±n·2^(e-10) of its hi, n in 0..7.
void EncodeLo(const uint16_t* hi, const uint16_t* lo, int64_t steps, uint8_t* nib) {
  for (int64_t s = 0; s < steps; ++s) {
    uint8_t* ns = nib + s * 512;
    std::memset(ns, 0, 512);
    for (int64_t e = 0; e < 1024; ++e) {
      const uint16_t h = hi[s * 1024 + e], l = lo[s * 1024 + e];
      int n = 0;
      if ((l & 0x7FFF) != 0) {
        const float v = std::ldexp(std::fabs(BF16ToF32(l)), 137 - ((h >> 7) & 0xFF));
        n = static_cast<int>(v);
        TARMAC_CHECK(static_cast<float>(n) == v && n >= 1 && n <= 7 && (l >> 15) == (h >> 15));
      }
      ns[e / 64 * 32 + e % 32] |= static_cast<uint8_t>(e % 64 < 32 ? n : n << 4);
    }
  }
}

AmxPackedMatrix::Lo LoKindFor(DType type) {
  if (type == DType::kBF16) return AmxPackedMatrix::Lo::kNone;
  return type == DType::kF16 ? AmxPackedMatrix::Lo::kNibble : AmxPackedMatrix::Lo::kBf16;
}

}  // namespace

int64_t AmxPackedMatrix::PackedBytes(const MatrixView& w) {
  const int64_t n_blocks = (w.rows + kRowBlock - 1) / kRowBlock;
  const int64_t steps = (w.cols + kKStep - 1) / kKStep;
  const int64_t lo_bytes = LoKindFor(w.type) == Lo::kBf16     ? 2048
                           : LoKindFor(w.type) == Lo::kNibble ? 512
                                                              : 0;
  return n_blocks * steps * (2048 + lo_bytes);
}

std::unique_ptr<AmxPackedMatrix> AmxPackedMatrix::Pack(const MatrixView& w, ThreadPool* pool,
                                                       void* storage) {
  TARMAC_CHECK(AmxBf16Available());
  TARMAC_CHECK(IsMatVecType(w.type));
  TARMAC_CHECK(reinterpret_cast<uintptr_t>(storage) % AlignedBuffer::kAlign == 0);
  std::unique_ptr<AmxPackedMatrix> p(new AmxPackedMatrix());
  p->type_ = w.type;
  p->rows_ = w.rows;
  p->cols_ = w.cols;
  p->steps_ = (w.cols + kKStep - 1) / kKStep;
  p->lo_kind_ = LoKindFor(w.type);
  const int64_t n_blocks = (w.rows + kRowBlock - 1) / kRowBlock;
  const int64_t half = n_blocks * p->steps_ * 1024;  // u16 per hi (or lo)
  // StageWeightBlock writes every hi/lo value of every block (zeros past the matrix) and
  // EncodeLo every nibble: no serial zeroing of up to 1 GiB first.
  uint16_t* hi = static_cast<uint16_t*>(storage);
  if (hi == nullptr) {
    p->buf_.Resize(std::max<int64_t>(64, PackedBytes(w)), /*huge_pages=*/false, /*zero=*/false);
    hi = p->buf_.as<uint16_t>();
  }
  p->hi_ = hi;
  if (p->lo_kind_ == Lo::kBf16) p->lo_ = hi + half;
  if (p->lo_kind_ == Lo::kNibble) p->nib_ = reinterpret_cast<const uint8_t*>(hi + half);
  const int64_t steps = p->steps_;
  const Lo kind = p->lo_kind_;
  auto run = [&](int64_t b0, int64_t b1, int) {
    AlignedBuffer row(std::max<int64_t>(64, steps * kKStep * 4));
    // lo of a block that is not kept as bf16: encoded into nibbles (F16), or dropped (BF16,
    // whose padding rows still get a lo written).
    AlignedBuffer lo_tmp(kind == Lo::kBf16 ? 64 : steps * 2048);
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r0 = blk * kRowBlock;
      uint16_t* bh = hi + blk * steps * 1024;
      uint16_t* bl = kind == Lo::kBf16 ? hi + half + blk * steps * 1024 : lo_tmp.as<uint16_t>();
      StageWeightBlock(w, r0, std::min(w.rows, r0 + kRowBlock), steps, bh, bl, row.as<float>());
      TransposeWeightTiles(reinterpret_cast<uint32_t*>(bh), 2 * steps);
      if (kind == Lo::kNone) continue;
      TransposeWeightTiles(reinterpret_cast<uint32_t*>(bl), 2 * steps);
      if (kind == Lo::kNibble) {
        EncodeLo(bh, bl, steps, reinterpret_cast<uint8_t*>(hi + half) + blk * steps * 512);
      }
    }
  };
  if (pool == nullptr || pool->num_threads() == 1) {
    run(0, n_blocks, 0);
  } else {
    pool->ParallelFor(n_blocks, 1, run);
  }
  return p;
}

bool AmxPackedMatrix::Matches(const MatrixView& w) const {
  return w.type == type_ && w.rows == rows_ && w.cols == cols_;
}

}  // namespace tarmac::kernels
