// Q4_0Interleaved: a copy of a Q4_0 weight matrix re-laid out for the batch-1 decode kernel
// (MatVecInt8), made once at model load.
//
// Why: in the GGUF layout each 18-byte block holds one row's 32 weights, so a vector of 16
// int32 lanes covers 4 blocks of one row; its lanes need per-block scales (a shuffle and a
// conversion per 4 blocks), a byte permute to gather the blocks' nibbles, and a horizontal sum
// per row. Interleaving 16 rows makes each int32 lane one row: the nibbles load straight into
// vpdpbusd, the 16 rows' scales are one f16 vector per block, x is broadcast from memory, and
// there is no per-row reduction. It halves the vector-port work per weight byte, which is
// what bounds Q4_0 decode on a core (2 vCPUs here share one).
//
// Layout: row groups of 16 rows (the last padded with zero weights and zero scales), each
// group_stride() bytes (nb · 288 rounded up to 64; nb = 32-column blocks per row):
//   quants(g) + 256·b: [s = 0..3][row 0..15][t = 0..3] the byte qs[4s + t] of that row's
//                      block b (low nibble: column 4s + t; high nibble: column 16 + 4s + t);
//   scales(g) + 16·b:  the 16 rows' f16 scales d of block b.
// Quants stay 64-byte aligned (no cache-line-split loads). The same bytes as the GGUF matrix,
// only moved: the copy has the original's size (+ < 64 bytes per group).
//
// Immutable after Pack; thread-safe to read. Owns its buffer.
#pragma once

#include <cstdint>
#include <memory>

#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::kernels {

class Q4_0Interleaved {
 public:
  static constexpr int64_t kRows = 16;        // rows per group (int32 lanes of a zmm)
  static constexpr int64_t kQuantBytes = 256;  // one group's block: 16 rows × 16 bytes

  // Preconditions: w.type == Q4_0; w.cols % 32 == 0.
  static std::unique_ptr<Q4_0Interleaved> Pack(const MatrixView& w);
  static int64_t PackedBytes(const MatrixView& w);

  // Whether this was packed from a matrix of w's type and shape.
  bool Matches(const MatrixView& w) const;
  int64_t rows() const { return rows_; }
  int64_t blocks() const { return nb_; }  // 32-column blocks per row
  int64_t groups() const { return (rows_ + kRows - 1) / kRows; }
  int64_t group_stride() const { return GroupStride(nb_); }
  const uint8_t* quants(int64_t g) const { return buf_.data() + g * group_stride(); }
  const uint16_t* scales(int64_t g) const {
    return reinterpret_cast<const uint16_t*>(quants(g) + nb_ * kQuantBytes);
  }

 private:
  static int64_t GroupStride(int64_t nb) { return (nb * (kQuantBytes + 32) + 63) / 64 * 64; }
  AlignedBuffer buf_;
  int64_t rows_ = 0, cols_ = 0, nb_ = 0;
};

}  // namespace tarmac::kernels
