// Which matrices get a prepared copy, within what memory, in which arena (see prepared_weights.h).

#include "kernels/prepared_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "base/check.h"
#include "base/thread_pool.h"
#include "kernels/dequant.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace tarmac::kernels {
namespace {

// One arena's slices: the matrices bytes_of accepts, each at a 64-byte aligned offset.
struct ArenaPlan {
  std::vector<std::pair<MatrixView*, int64_t>> slices;  // matrix, byte offset
  int64_t total = 0;                                    // bytes of the arena
};

// bytes_of(matrix, bytes planned so far): the matrix's copy's bytes, or -1 to leave it out.
template <typename BytesOf>
ArenaPlan PlanArena(std::span<MatrixView* const> matrices, BytesOf bytes_of) {
  ArenaPlan plan;
  for (MatrixView* w : matrices) {
    if (w->rows == 0 || w->cols == 0) continue;
    const int64_t bytes = bytes_of(*w, plan.total);
    if (bytes < 0) continue;
    plan.slices.emplace_back(w, plan.total);
    plan.total += (bytes + AlignedBuffer::kAlign - 1) / AlignedBuffer::kAlign * AlignedBuffer::kAlign;
  }
  return plan;
}

// Gives the whole pages inside [p, p + bytes) back to the OS (anonymous memory reads back as
// zeros afterwards, a file mapping re-reads the file); partial pages at the ends stay.
void ReleasePages(const void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t b = (a + page - 1) / page * page, e = (a + bytes) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);  // advisory
}

// The cap on copies that are extra memory: 2 GiB and a quarter of the memory free now.
int64_t ExtraCopyCap() {
  const int64_t avail = static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return std::min<int64_t>(int64_t{2} << 30, std::max<int64_t>(avail, 0) / 4);
}

void Report(const PreparedWeights::Options& o, const char* stage, int64_t done, int64_t total) {
  if (o.progress) o.progress(stage, done, total);
}

}  // namespace

void DequantizeMatrixRow(const MatrixView& w, int64_t r, float* dst) {
  TARMAC_CHECK(r >= 0 && r < w.rows);
  if (w.data != nullptr) return DequantizeRow(w.type, w.row(r), dst, w.cols);
  if (const auto* q = PreparedAs<QuantInterleaved>(w)) return q->DequantizeRow(r, dst);
  if (const auto* p = PreparedAs<PanelPackedMatrix>(w)) return p->DequantizeRow(r, dst);
  TARMAC_CHECK(false && "a matrix without its source bytes has no copy to read");
}

void PreparedWeights::Prepare(std::span<MatrixView* const> matrices, const Options& options) {
  TARMAC_CHECK(amx_.empty() && interleaved_.empty() && panels_.empty());
  for (const MatrixView* w : matrices) TARMAC_CHECK(w->prepared == nullptr);
  PrepareAmx(matrices, options);
  PrepareInterleaved(matrices, options);
  PreparePanels(matrices, options);
}

void PreparedWeights::PrepareAmx(std::span<MatrixView* const> matrices, const Options& options) {
  // Split the weights that MatMul runs on AMX (non-int8 dtypes) once (2-4 bytes per weight)
  // while they fit the budget; the rest are split per call. All of them in one arena of huge
  // pages: a prefix hit's few-token step streams the whole copy.
  constexpr int64_t kBudget = int64_t{1} << 30;
  const ArenaPlan plan = PlanArena(matrices, [](const MatrixView& w, int64_t planned) -> int64_t {
    if (!WantsAmxCopy(w.type)) return -1;
    const int64_t bytes = AmxPackedMatrix::PackedBytes(w);
    return planned + bytes > kBudget ? -1 : bytes;
  });
  if (plan.slices.empty()) return;
  // Not zeroed: Pack writes every byte of each matrix's slice (the gaps are never read).
  amx_arena_.Resize(static_cast<size_t>(plan.total), /*huge_pages=*/true, /*zero=*/false);
  const int64_t n = static_cast<int64_t>(plan.slices.size());
  for (const auto& [w, offset] : plan.slices) {
    Report(options, "preparing weights (AMX)", static_cast<int64_t>(amx_.size()), n);
    amx_.push_back(AmxPackedMatrix::Pack(*w, nullptr, amx_arena_.data() + offset));
    w->prepared = amx_.back().get();
    amx_bytes_ += AmxPackedMatrix::PackedBytes(*w);
  }
  Report(options, "preparing weights (AMX)", n, n);
}

void PreparedWeights::PrepareInterleaved(std::span<MatrixView* const> matrices, const Options& options) {
  // Q4_0 / Q8_0 decode is bound by vector-port work in the GGUF layout; the interleaved copy
  // halves it (quant_interleaved.h), and prefill packs from it too (matmul_int8.h). With
  // release_source the copies are made one matrix at a time, each releasing its source, so the
  // peak is one matrix more; otherwise every copy is extra (though file pages are reclaimable
  // cache) and so capped at 2 GiB and a quarter of the memory free now, as is a single matrix
  // either way, so a large model on a small machine is not pushed out of memory by its own
  // speed-up. Past the caps a matrix keeps the per-row kernel.
  const int64_t cap = ExtraCopyCap();
  const bool release = options.release_source;
  int64_t extra_left = cap;
  const ArenaPlan plan = PlanArena(matrices, [&](const MatrixView& w, int64_t) -> int64_t {
    if (!WantsInterleavedCopy(w.type)) return -1;  // never a type with an AMX copy
    const int64_t bytes = QuantInterleaved::PackedBytes(w);
    if (bytes > cap || (!release && bytes > extra_left)) return -1;
    if (!release) extra_left -= bytes;
    return bytes;
  });
  if (plan.slices.empty()) return;
  // One arena of huge pages (streamed through once per decoded token), not zeroed: Pack
  // writes every byte of each slice, and a page is first touched when its matrix is packed, so
  // the memory grows one matrix at a time as the sources are released.
  interleaved_arena_.Resize(static_cast<size_t>(plan.total), /*huge_pages=*/true, /*zero=*/false);
  ThreadPool pool(ThreadPool::DefaultThreads());
  const int64_t n = static_cast<int64_t>(plan.slices.size());
  for (const auto& [w, offset] : plan.slices) {
    Report(options, "preparing weights (int8 decode)", static_cast<int64_t>(interleaved_.size()), n);
    interleaved_.push_back(QuantInterleaved::Pack(*w, &pool, interleaved_arena_.data() + offset));
    w->prepared = interleaved_.back().get();
    interleaved_bytes_ += QuantInterleaved::PackedBytes(*w);
    if (release) {
      ReleasePages(w->data, static_cast<size_t>(w->rows * w->row_stride));
      w->data = nullptr;  // nothing may read it now: fail loudly rather than read zeros
    }
  }
  Report(options, "preparing weights (int8 decode)", n, n);
}

void PreparedWeights::PreparePanels(std::span<MatrixView* const> matrices, const Options& options) {
  // F16 GEMM without AMX converts and transposes every weight into f32 panels on every call,
  // a cost per matrix that a few-token step (a prefix hit's) pays in full. The panel copy is
  // the same f16 values in that order, and the dispatch table runs every token count of a
  // matrix with one on the panels, so with release_source the copy replaces its source as
  // the interleaved ones do (one matrix at a time); otherwise it is extra memory, within the
  // caps. One arena of huge pages in forward order.
  if (!WantsPanelCopy(DType::kF16)) return;
  const int64_t width = MatMulPanelWidth();
  const int64_t cap = ExtraCopyCap();
  const bool release = options.release_source;
  int64_t left = cap;
  const ArenaPlan plan = PlanArena(matrices, [&](const MatrixView& w, int64_t) -> int64_t {
    if (!WantsPanelCopy(w.type) || w.data == nullptr) return -1;
    const int64_t bytes = PanelPackedMatrix::PackedBytes(w, width);
    if (bytes > cap || (!release && bytes > left)) return -1;
    if (!release) left -= bytes;
    return bytes;
  });
  if (plan.slices.empty()) return;
  panel_arena_.Resize(static_cast<size_t>(plan.total), /*huge_pages=*/true, /*zero=*/false);
  ThreadPool pool(ThreadPool::DefaultThreads());
  const int64_t n = static_cast<int64_t>(plan.slices.size());
  for (const auto& [w, offset] : plan.slices) {
    Report(options, "preparing weights (f16 panels)", static_cast<int64_t>(panels_.size()), n);
    panels_.push_back(PanelPackedMatrix::Pack(*w, width, &pool, panel_arena_.data() + offset));
    w->prepared = panels_.back().get();
    panel_bytes_ += PanelPackedMatrix::PackedBytes(*w, width);
    if (release) {
      ReleasePages(w->data, static_cast<size_t>(w->rows * w->row_stride));
      w->data = nullptr;  // nothing may read it now: fail loudly rather than read zeros
    }
  }
  Report(options, "preparing weights (f16 panels)", n, n);
}

}  // namespace tarmac::kernels
