// QuantInterleaved: a copy of a Q4_0, Q8_0 or Q4_K weight matrix re-laid out for the batch-1
// decode kernel (MatVecInt8), made once at model load.
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
// group_stride() bytes. A group is a run of units of unit_blocks() 32-column blocks (nb blocks
// per row; the last unit may hold fewer), each unit its blocks' quants, then their scales:
//   block_quants(g, b), quant_bytes() per block: [s][row 0..15][t = 0..3], 4 bytes of each row
//   per s:
//     Q4_0 (256 B, s < 4): the byte qs[4s + t] of that row's block b (low nibble: column
//          4s + t; high nibble: column 16 + 4s + t);
//     Q4_K (256 B, s < 4): the same nibble order for block b = sub-block b % 8 of super-block
//          b / 8 (its unsigned quants 0..15, re-paired: GGUF pairs sub-blocks 2p and 2p + 1);
//     Q8_0 (512 B, s < 8): qs[4s + t] + 128 as an unsigned byte (column 4s + t);
//   Q4_0 / Q8_0 (units of 4 blocks): block_scales(g, b): the 16 rows' f16 scales d of block b;
//   Q4_K (units of 8 blocks, one super-block): unit_scales(g, u), kSuperBytes: the 16 rows' f16
//          d, their f16 dmin, then per sub-block j the 16 rows' 6-bit scales (u8), then their
//          6-bit mins; block b's weight is d·sc·u - dmin·m, both products exact in f32
//          (block_scale_min).
// Why scales sit beside their quants: a decode walk then reads one contiguous stream, and the
// kernels prefetch a whole unit at once. With the scales at the group's end (a second stream)
// even a bare walk of the bytes, with no arithmetic, fell well short of the read probe
// (bench/NOTES.md).
// Quants stay 64-byte aligned (no cache-line-split loads). The copy has the original's size
// (Q4_K: + 2.8%, the scales unpacked to bytes; + < 64 bytes per group, + the unused room of a
// short last unit).
//
// Immutable after Pack; thread-safe to read. Owns its buffer, or reads caller's storage.
#pragma once

#include <cstdint>
#include <memory>

#include "base/check.h"
#include "base/thread_pool.h"
#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::kernels {

class QuantInterleaved final : public PreparedMatrix {
 public:
  static constexpr int64_t kRows = 16;  // rows per group (int32 lanes of a zmm)
  static constexpr PreparedLayout kLayout = PreparedLayout::kInterleaved;

  // Q4_K scales per group and super-block: d[16], dmin[16] (f16), sc[8][16], m[8][16] (u8).
  static constexpr int64_t kSuperBytes = 320;

  // Q4_0, Q8_0 and Q4_K.
  static bool Supports(DType type) {
    return type == DType::kQ4_0 || type == DType::kQ8_0 || type == DType::kQ4_K;
  }
  // Preconditions: Supports(w.type); w.cols a multiple of the type's block size. pool (may be nullptr) splits the work.
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
  int64_t unit_blocks() const { return UnitBlocks(type_); }
  int64_t group_stride() const { return GroupStride(type_, nb_); }
  const uint8_t* group(int64_t g) const { return data_ + g * group_stride(); }
  // Block b's quants in group g (see Layout). Preconditions: 0 <= b < blocks().
  const uint8_t* block_quants(int64_t g, int64_t b) const {
    return group(g) + BlockOffset(type_, b);
  }
  // Q4_0 / Q8_0: block b's 16 f16 scales (see Layout). Preconditions: type() != kQ4_K.
  const uint16_t* block_scales(int64_t g, int64_t b) const {
    TARMAC_DCHECK(type_ != DType::kQ4_K);
    return reinterpret_cast<const uint16_t*>(group(g) + ScalesOffset(type_, b));
  }
  // Q4_K: super-block u's scales in group g (see Layout). Preconditions: type() == kQ4_K.
  const uint8_t* unit_scales(int64_t g, int64_t u) const {
    TARMAC_DCHECK(type_ == DType::kQ4_K);
    return group(g) + UnitScalesOffset(type_, u);
  }

  // The layout's sizes as constants, for kernels specialised on the type.
  static constexpr int64_t QuantBytes(DType t) { return t == DType::kQ8_0 ? 512 : 256; }
  static constexpr int64_t UnitBlocks(DType t) { return t == DType::kQ4_K ? 8 : 4; }
  static constexpr int64_t UnitScaleBytes(DType t) {
    return t == DType::kQ4_K ? kSuperBytes : UnitBlocks(t) * 2 * kRows;
  }
  static constexpr int64_t UnitBytes(DType t) {
    return UnitBlocks(t) * QuantBytes(t) + UnitScaleBytes(t);
  }
  // Byte offsets in a group: block b's quants; unit u's scales; Q4_0 / Q8_0 block b's scales.
  static constexpr int64_t BlockOffset(DType t, int64_t b) {
    return b / UnitBlocks(t) * UnitBytes(t) + b % UnitBlocks(t) * QuantBytes(t);
  }
  static constexpr int64_t UnitScalesOffset(DType t, int64_t u) {
    return u * UnitBytes(t) + UnitBlocks(t) * QuantBytes(t);
  }
  static constexpr int64_t ScalesOffset(DType t, int64_t b) {
    return UnitScalesOffset(t, b / UnitBlocks(t)) + b % UnitBlocks(t) * 2 * kRows;
  }
  // Q4_K: row i (0..15) of group g, block b: scale d·sc and min dmin·m as the GGUF block's
  // reference decode computes them (exact f32 products). Preconditions: type() == kQ4_K.
  void block_scale_min(int64_t g, int64_t b, int64_t i, float* scale, float* min) const;

 private:
  QuantInterleaved() : PreparedMatrix(kLayout) {}
  static int64_t GroupStride(DType t, int64_t nb) {
    return (nb + UnitBlocks(t) - 1) / UnitBlocks(t) * UnitBytes(t);
  }
  AlignedBuffer buf_;  // empty when packed into caller's storage
  uint8_t* data_ = nullptr;  // buf_'s bytes or the storage
  DType type_ = DType::kQ4_0;
  int64_t rows_ = 0, cols_ = 0, nb_ = 0;
};

}  // namespace tarmac::kernels
