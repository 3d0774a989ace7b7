// PanelPackedMatrix: an F16 weight matrix laid out once, at load, in MatMulPanels' panel order
// (matmul.h), so a GEMM call reads its panels straight from the copy instead of converting and
// transposing every weight on every call. That per-call packing is a fixed cost per matrix, so
// it weighs most on the few-token steps of a prefix-cache hit (bench/NOTES.md). Used where
// MatMul runs F16 weights on f32 panels: x86 levels with AVX2 (F16C) and without AMX, where
// the dispatch table sends every token count of a matrix with this copy to the panels.
//
// Layout: panels of panel_width() consecutive rows (the last zero-padded), each cols() × width
// f16 values in [k][row] order: element (r, k) is at panel(r / width)[k · width + r % width].
// The values are the source's f16 bits unchanged, so products equal those packed per call, bit
// for bit. Where the source is the caller's own memory the copy replaces it (PreparedWeights'
// release_source); otherwise it costs as many bytes again.
//
// Immutable after Pack; thread-safe to read. Owns its buffer, or reads caller's storage.
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::kernels {

class PanelPackedMatrix final : public PreparedMatrix {
 public:
  static constexpr PreparedLayout kLayout = PreparedLayout::kF16Panels;

  static bool Supports(DType type) { return type == DType::kF16; }
  // Preconditions: Supports(w.type); width >= 1 (MatMulPanelWidth() for MatMul to use it).
  // pool (may be nullptr) splits the work. storage: nullptr (the copy owns its buffer), or
  // PackedBytes(w, width) bytes, 64-byte aligned, that outlive the result.
  static std::unique_ptr<PanelPackedMatrix> Pack(const MatrixView& w, int64_t width,
                                                 ThreadPool* pool = nullptr,
                                                 void* storage = nullptr);
  static int64_t PackedBytes(const MatrixView& w, int64_t width);

  // Whether this was packed from a matrix of w's type and shape.
  bool Matches(const MatrixView& w) const;
  int64_t panel_width() const { return width_; }
  int64_t panels() const { return (rows_ + width_ - 1) / width_; }
  // Panel p's cols × width f16 bits. Preconditions: 0 <= p < panels().
  const uint16_t* panel(int64_t p) const { return data_ + p * cols_ * width_; }
  // Row r's values as f32 (dst: cols floats), equal to the source row's: lets an embedding
  // lookup read a matrix whose source bytes were released. Preconditions: 0 <= r < rows.
  void DequantizeRow(int64_t r, float* dst) const;

 private:
  PanelPackedMatrix() : PreparedMatrix(kLayout) {}
  AlignedBuffer buf_;  // empty when packed into caller's storage
  const uint16_t* data_ = nullptr;
  int64_t rows_ = 0, cols_ = 0, width_ = 0;
};

}  // namespace tarmac::kernels
