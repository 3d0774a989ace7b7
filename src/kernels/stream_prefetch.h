// StreamPrefetch: how a decode kernel prefetches the weight stream ahead of its loads, and the
// two functions that issue those prefetches: PrefetchInterleavedBlock for the passes walking a
// QuantInterleaved group (AVX-512 and AVX2), PrefetchSpan for any walk in steps (Q6_K rows).
//
// A token's matrix-vector product reads each weight once, so the loop alone keeps too few
// misses in flight to stream at DRAM speed; the hardware prefetchers stop at 4 KiB pages.
// Which distances and pattern keep a core streaming depends on the memory system (how many
// misses it tracks, how its prefetchers react), so the plan is chosen per CPU vendor and kernel
// by the dispatch table (dispatch.h, ChooseStreamPrefetch); bench/NOTES.md has the sweeps.
//
// Pure value type and inline function; thread-safe. Prefetches never change results.
#pragma once

#include <cstdint>

#include "kernels/quant_interleaved.h"
#include "tensor/dtype.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TARMAC_STREAM_PREFETCH_X86 1
#else
#define TARMAC_STREAM_PREFETCH_X86 0
#endif

namespace tarmac::kernels {

struct StreamPrefetch {
  // Distance ahead of the block being read (bytes) of the prefetch into L2 (T1 hint). > 0.
  int64_t l2_ahead = 3072;
  // Distance of a second prefetch into L1 (T0 hint), bytes; 0: none. Less than l2_ahead, so
  // it finds its lines already on their way to L2.
  int64_t l1_ahead = 0;
  // Interleaved walks only (walks without units always prefetch per step): true, each block
  // prefetches its own lines (and the last block of a unit the unit's scales); false, a unit's
  // first block prefetches the whole unit into L2 in one burst (l1_ahead unused).
  bool spread = false;
};

// One walk step's prefetches: the `bytes` from p + l2_ahead (+ l2_skip) into L2 and, with an
// L1 distance, those from p + l1_ahead (+ l1_skip) into L1 (p: the step's first byte; a skip
// moves a prefetch that runs past the walk's end on to where the walk continues: see
// RunOffSkip). Always inlined: GCC's IPA otherwise judges a function of prefetches alone free
// of side effects and deletes the calls before it would inline them.
[[gnu::always_inline]] inline void PrefetchSpan(const StreamPrefetch& pf, const uint8_t* p,
                                                int64_t bytes, int64_t l2_skip = 0,
                                                int64_t l1_skip = 0) {
#if TARMAC_STREAM_PREFETCH_X86
  for (int64_t l = 0; l < bytes; l += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + pf.l2_ahead + l2_skip + l), _MM_HINT_T1);
  }
  if (pf.l1_ahead > 0) {
    for (int64_t l = 0; l < bytes; l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + pf.l1_ahead + l1_skip + l), _MM_HINT_T0);
    }
  }
#else
  (void)pf, (void)p, (void)bytes, (void)l2_skip, (void)l1_skip;
#endif
}

// A walk over one group of a QuantInterleaved matrix (group_stride bytes) whose next walk
// starts `skip` bytes past the group's end (another group of the matrix: a pass over groups
// g, g + 1 continues at g + 2, g + 3, so each stream skips a group): the skip for a prefetch
// `ahead` bytes past offset off, so the prefetches that run past the group warm the start of
// the stream's next group instead of the other stream's current one.
[[gnu::always_inline]] inline int64_t RunOffSkip(int64_t off, int64_t ahead, int64_t stride,
                                                 int64_t skip) {
  return off + ahead >= stride ? skip : 0;
}

// Prefetches for block b of a group walk in block order, p its quants
// (QuantInterleaved::BlockOffset(kT, b) bytes into the group). Only the first pass over a
// group calls it (later passes find the group in cache). Always inlined, as PrefetchSpan.
// l2_skip, l1_skip: as PrefetchSpan's (RunOffSkip of the block's offset in its group).
template <DType kT>
[[gnu::always_inline]] inline void PrefetchInterleavedBlock(const StreamPrefetch& pf,
                                                            const uint8_t* p, int64_t b,
                                                            int64_t l2_skip = 0,
                                                            int64_t l1_skip = 0) {
#if TARMAC_STREAM_PREFETCH_X86
  using QI = QuantInterleaved;
  constexpr int64_t kQuant = QI::QuantBytes(kT), kU = QI::UnitBlocks(kT);
  if (!pf.spread) {
    if (b % kU != 0) return;  // p is the unit's first byte: the unit ahead, scales included
    for (int64_t l = 0; l < QI::UnitBytes(kT); l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + pf.l2_ahead + l2_skip + l), _MM_HINT_T1);
    }
    return;
  }
  PrefetchSpan(pf, p, kQuant, l2_skip, l1_skip);
  if (b % kU == kU - 1) {  // the unit's scales follow its last block's quants
    for (int64_t l = 0; l < QI::UnitScaleBytes(kT); l += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + pf.l2_ahead + l2_skip + kQuant + l),
                   _MM_HINT_T1);
    }
  }
#else
  (void)pf, (void)p, (void)b, (void)l2_skip, (void)l1_skip;
#endif
}

}  // namespace tarmac::kernels
