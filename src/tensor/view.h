// Non-owning views over tensor memory, passed to kernels.
#pragma once

#include <cstdint>

#include "base/check.h"
#include "tensor/dtype.h"

namespace tarmac {

// A row-major matrix of `rows` rows × `cols` elements of `type`; row r starts at
// data + r * row_stride bytes. For block types cols is a multiple of the block size.
struct MatrixView {
  DType type = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // bytes
  // Optional kernel-specific copy of these same weights laid out ahead of time, its kind given
  // by type: a kernels::QuantInterleaved for Q4_0/Q8_0, a kernels::AmxPackedMatrix for the
  // types MatMul runs on AMX (not Q4_K, which has none). Owned elsewhere, must outlive the
  // view; null when none. With a QuantInterleaved copy, data may be null (the model released
  // the GGUF bytes; the kernels read only the copy).
  const void* packed = nullptr;

  const uint8_t* row(int64_t r) const {
    TARMAC_DCHECK(r >= 0 && r < rows);
    return static_cast<const uint8_t*>(data) + r * row_stride;
  }
  static MatrixView Dense(DType t, const void* data, int64_t rows, int64_t cols) {
    return MatrixView{t, data, rows, cols, RowBytes(t, cols), nullptr};
  }
};

}  // namespace tarmac
