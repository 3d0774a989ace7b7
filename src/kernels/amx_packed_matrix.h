// AmxPackedMatrix: a weight matrix split for the AMX kernels (matmul_amx.h) once, ahead of
// time. Packing is here; the kernels that read it are in matmul_amx.cc.
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// A weight matrix split into hi/lo bf16 once, ahead of time, in AMX's B-tile pair layout
// (rows rounded up to 32, cols to 32). With it MatMulAmx swaps roles: activations are tile A
// in their own row-major order and each C tile is 16 tokens × 16 weight rows, stored straight
// into y; a pass covers whole 16-token tiles (an odd last tile runs alone). Immutable after
// Pack; reading it is thread-safe. Point MatrixView::prepared at it to use it (PreparedWeights does).
//
// Bytes per weight by what lo needs:
//   BF16: 2, hi only (a bf16 weight is its own hi).
//   F16: 2.5. hi is the f16 value truncated to bf16 (its top 8 significant bits); the other 3
//     bits, lo = v - hi = ±n·2^(e-10) with e hi's exponent and n in 0..7, are kept as the
//     nibble n and rebuilt exactly from hi's sign and exponent per K step (DecodeLo,
//     matmul_amx.cc). The 32-token matmuls of a prefix hit read their weights from memory,
//     so the bytes are the time (a bf16 lo would take 4 bytes per weight).
//   F32 and quantized types (dequantized to f32): 4, hi and lo = RNE(v - hi) as bf16.
class AmxPackedMatrix final : public PreparedMatrix {
 public:
  enum class Lo { kNone, kNibble, kBf16 };
  static constexpr PreparedLayout kLayout = PreparedLayout::kAmxSplit;

  // Preconditions: AmxBf16Available(); IsMatVecType(w.type). pool may be nullptr.
  // storage: nullptr (the matrix owns its bytes), or PackedBytes(w) bytes, 64-byte aligned,
  // that outlive the result (a model packs all its matrices into one huge-page arena: with
  // 4 KiB pages a few-token step that streams the copy pays in TLB misses, and an arena per
  // matrix would round each up to 2 MiB; bench/NOTES.md).
  static std::unique_ptr<AmxPackedMatrix> Pack(const MatrixView& w, ThreadPool* pool,
                                               void* storage = nullptr);
  static int64_t PackedBytes(const MatrixView& w);

  // Whether this was packed from a matrix of w's type and shape.
  bool Matches(const MatrixView& w) const;
  Lo lo_kind() const { return lo_kind_; }
  // Tiles of row block blk (32 weight rows), per K step 2 row tiles × [16 k pairs][16 rows][2]
  // bf16, 1 KiB per tile: hi always; lo when lo_kind() is kBf16.
  const uint16_t* hi(int64_t blk) const { return hi_ + blk * steps_ * 1024; }
  const uint16_t* lo(int64_t blk) const { return lo_ + blk * steps_ * 1024; }
  // When lo_kind() is kNibble: 512 bytes per K step; element e of the step's 1024 (hi's order)
  // is in byte e / 64 · 32 + e % 32, the low nibble when e % 64 < 32, else the high one.
  const uint8_t* nibbles(int64_t blk) const { return nib_ + blk * steps_ * 512; }

 private:
  AmxPackedMatrix() : PreparedMatrix(kLayout) {}
  AlignedBuffer buf_;  // empty when packed into caller's storage
  const uint16_t* hi_ = nullptr;
  const uint16_t* lo_ = nullptr;
  const uint8_t* nib_ = nullptr;
  Lo lo_kind_ = Lo::kBf16;
  DType type_ = DType::kF32;
  int64_t rows_ = 0, cols_ = 0, steps_ = 0;
};

}  // namespace tarmac::kernels
