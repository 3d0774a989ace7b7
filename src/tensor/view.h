// Non-owning views over tensor memory, passed to kernels.
#pragma once

#include <cstdint>

#include "base/check.h"
#include "tensor/dtype.h"

namespace tarmac {

// The layouts a kernel may prepare a weight matrix in ahead of time (kernels/prepared_weights.h
// makes them): kInterleaved, a kernels::QuantInterleaved (Q4_0/Q8_0 decode and prefill);
// kAmxSplit, a kernels::AmxPackedMatrix (the types MatMul runs on AMX tiles); kF16Panels, a
// kernels::PanelPackedMatrix (F16 GEMM on f32 panels without AMX).
enum class PreparedLayout { kNone, kInterleaved, kAmxSplit, kF16Panels };

// A kernel's own copy of a matrix's weights; MatrixView::prepared points at one. Immutable
// once made; reading it is thread-safe. Each layout's type derives from this, passing its
// kLayout, so PreparedAs<T> can check the cast.
class PreparedMatrix {
 public:
  PreparedLayout layout() const { return layout_; }

 protected:
  explicit PreparedMatrix(PreparedLayout layout) : layout_(layout) {}
  ~PreparedMatrix() = default;  // owned and destroyed as the derived type

 private:
  PreparedLayout layout_;
};

// A row-major matrix of `rows` rows × `cols` elements of `type`; row r starts at
// data + r * row_stride bytes. For block types cols is a multiple of the block size.
struct MatrixView {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // bytes
  // Optional kernel-specific copy of these same weights laid out ahead of time (its layout()
  // says which; read it through PreparedAs). Owned elsewhere (kernels::PreparedWeights), must
  // outlive the view; null when none. With an interleaved copy, data may be null (the GGUF
  // bytes were released; the kernels read only the copy).
  const PreparedMatrix* prepared = nullptr;

  const uint8_t* row(int64_t r) const {
    TARMAC_DCHECK(r >= 0 && r < rows);
    return static_cast<const uint8_t*>(data) + r * row_stride;
  }
  static MatrixView Dense(DType t, const void* data, int64_t rows, int64_t cols) {
    return MatrixView{t, data, rows, cols, RowBytes(t, cols), nullptr};
  }
  PreparedLayout prepared_layout() const {
    return prepared == nullptr ? PreparedLayout::kNone : prepared->layout();
  }
};

// w's prepared copy as a T (T::kLayout names its layout), or null when it has none of that layout.
template <typename T>
const T* PreparedAs(const MatrixView& w) {
  return w.prepared_layout() == T::kLayout ? static_cast<const T*>(w.prepared) : nullptr;
}

}  // namespace tarmac
