// PreparedWeights: the kernels' own copies of a model's weight matrices, laid out ahead of time
// for the kernel the dispatch table runs on them (dispatch.h): AMX's split-bf16 tiles
// (AmxPackedMatrix) for the types MatMul runs on AMX, the interleaved int8 layout
// (QuantInterleaved) for Q4_0/Q8_0 decode and prefill, and F16 panels (PanelPackedMatrix) for
// the f32-panel GEMM where there is no AMX. The model keeps the shapes and the
// forward recipe; which matrices get which copy, the memory caps and the arenas are here.
//
// Owns every copy and the huge-page arenas they live in; Prepare points each matrix's
// MatrixView::prepared at its copy (and may release its source bytes, see Options). Immutable
// after Prepare; reading it is thread-safe. Must outlive the views that point into it; not
// copyable (views hold pointers into it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/amx_packed_matrix.h"
#include "kernels/panel_packed_matrix.h"
#include "kernels/quant_interleaved.h"
#include "tensor/aligned_buffer.h"
#include "tensor/view.h"

namespace tarmac::kernels {

// Row r of w as f32 (dst: w.cols floats), from its source bytes or, where a copy replaced
// them, from the copy. Preconditions: 0 <= r < w.rows; w has its source or an interleaved or
// panel copy.
void DequantizeMatrixRow(const MatrixView& w, int64_t r, float* dst);

class PreparedWeights {
 public:
  using ProgressFn = std::function<void(const std::string& stage, int64_t done, int64_t total)>;
  struct Options {
    // The matrices' bytes are the caller's own memory (not a file mapping): an interleaved or
    // F16 panel copy then replaces its source (the source pages are released and the view's
    // data set to null, so the memory use stays the same; every kernel the dispatch table
    // runs on such a matrix reads the copy). Otherwise every copy is extra memory, capped at
    // 2 GiB and a quarter of the memory free now (each kind of copy on its own).
    bool release_source = false;
    ProgressFn progress{};  // may be empty ({}: initialisers that leave it out draw no warning)
  };

  PreparedWeights() = default;
  PreparedWeights(const PreparedWeights&) = delete;
  PreparedWeights& operator=(const PreparedWeights&) = delete;

  // Prepares `matrices` (in the order a forward pass streams them: each arena is laid out in
  // it) at the active ISA level. Preconditions: called once; no matrix has a copy yet.
  void Prepare(std::span<MatrixView* const> matrices, const Options& options);

  // Bytes of the AMX copies (0 without AMX), of the interleaved copies (0 without an
  // x86 int8 path or without Q4_0/Q8_0 matrices) and of the F16 panel copies (0 with AMX or
  // without F16 matrices).
  int64_t amx_bytes() const { return amx_bytes_; }
  int64_t interleaved_bytes() const { return interleaved_bytes_; }
  int64_t panel_bytes() const { return panel_bytes_; }

 private:
  void PrepareAmx(std::span<MatrixView* const> matrices, const Options& options);
  void PrepareInterleaved(std::span<MatrixView* const> matrices, const Options& options);
  void PreparePanels(std::span<MatrixView* const> matrices, const Options& options);

  AlignedBuffer amx_arena_;                                   // every AMX copy's bytes
  std::vector<std::unique_ptr<AmxPackedMatrix>> amx_;         // views point here
  int64_t amx_bytes_ = 0;
  AlignedBuffer interleaved_arena_;                           // every interleaved copy's bytes
  std::vector<std::unique_ptr<QuantInterleaved>> interleaved_;  // views point here
  int64_t interleaved_bytes_ = 0;
  AlignedBuffer panel_arena_;                                 // every F16 panel copy's bytes
  std::vector<std::unique_ptr<PanelPackedMatrix>> panels_;    // views point here
  int64_t panel_bytes_ = 0;
};

}  // namespace tarmac::kernels
