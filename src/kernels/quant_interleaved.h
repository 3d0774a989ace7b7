// QuantInterleaved: a copy of a Q4_0 or Q8_0 weight matrix re-laid out for the batch-1 decode
// kernel (MatVecInt8), made once at model load.
//
// Why: in the GGUF layout each block holds one row's 32 weights, so a vector of 16 int32
// lanes covers several blocks of one row; its lanes need per-block scales (a shuffle and a
// conversion per vector), a byte permute to gather the blocks' quants, and a horizontal sum per
// row. Interleaving 16 rows makes each int32 lane one row: the quants load straight into
// vpdpbusd, the 16 rows' scales are one f16 vector per block, x is broadcast from memory, and
// there is no per-row reduction. It halves the vector-port work per weight byte (Q4_0), which
// is what bounds decode on a core (2 vCPUs here share one).
//
// Layout: row groups of 16 rows (the last padded with zero quants and zero scales), each
// group_stride() bytes (nb · (quant_bytes() + 32) rounded up to 64; nb = 32-column blocks):
//   quants(g) + quant_bytes()·b: [s][row 0..15][t = 0..3], 4 bytes of each row per s:
//     Q4_0 (256 B, s < 4): the byte qs[4s + t] of that row's block b (low nibble: column
//          4s + t; high nibble: column 16 + 4s + t);
//     Q8_0 (512 B, s < 8): qs[4s + t] + 128 as an unsigned byte (column 4s + t);
//   scales(g) + 16·b: the 16 rows' f16 scales d of block b.
// Quants stay 64-byte aligned (no cache-line-split loads). The copy has the original's size
// (+ < 64 bytes per group).
//
// Immutable after Pack; thread-safe to read. Owns its buffer, or reads caller's storage.
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::kernels {

class QuantInterleaved final : public PreparedMatrix {
 public:
  static constexpr int64_t kRows = 16;  // rows per group (int32 lanes of a zmm)
  static constexpr PreparedLayout kLayout = PreparedLayout::kInterleaved;

  // Q4_0 and Q8_0.
  static bool Supports(DType type) { return type == DType::kQ4_0 || type == DType::kQ8_0; }
  // Preconditions: Supports(w.type); w.cols % 32 == 0. pool (may be nullptr) splits the work.
  // storage: nullptr (the copy owns a buffer of huge pages), or PackedBytes(w) bytes, 64-byte
  // aligned, that outlive the result: a model packs all its matrices into one arena (a huge-
  // page buffer each rounds every matrix up to 2 MiB, which inflates a small model's RSS many
  // times over; bench/NOTES.md).
  static std::unique_ptr<QuantInterleaved> Pack(const MatrixView& w, ThreadPool* pool = nullptr,
                                                void* storage = nullptr);
  static int64_t PackedBytes(const MatrixView& w);

  // Whether this was packed from a matrix of w's type and shape.
  bool Matches(const MatrixView& w) const;
  // Row r's values as f32 (dst: cols floats), equal to DequantizeRowRef of the original row:
  // lets an embedding lookup read a matrix whose GGUF bytes were released.
  // Preconditions: 0 <= r < rows().
  void DequantizeRow(int64_t r, float* dst) const;
  DType type() const { return type_; }
  int64_t rows() const { return rows_; }
  int64_t blocks() const { return nb_; }  // 32-column blocks per row
  int64_t groups() const { return (rows_ + kRows - 1) / kRows; }
  int64_t quant_bytes() const { return QuantBytes(type_); }  // per group and block
  int64_t group_stride() const { return GroupStride(type_, nb_); }
  const uint8_t* quants(int64_t g) const { return data_ + g * group_stride(); }
  const uint16_t* scales(int64_t g) const {
    return reinterpret_cast<const uint16_t*>(quants(g) + nb_ * quant_bytes());
  }

 private:
  QuantInterleaved() : PreparedMatrix(kLayout) {}
  static int64_t QuantBytes(DType t) { return t == DType::kQ8_0 ? 512 : 256; }
  static int64_t GroupStride(DType t, int64_t nb) {
    return (nb * (QuantBytes(t) + 32) + 63) / 64 * 64;
  }
  AlignedBuffer buf_;  // empty when packed into caller's storage
  uint8_t* data_ = nullptr;  // buf_'s bytes or the storage
  DType type_ = DType::kQ4_0;
  int64_t rows_ = 0, cols_ = 0, nb_ = 0;
};

}  // namespace tarmac::kernels
