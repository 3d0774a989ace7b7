// The AVX2 products on a QuantInterleaved copy (Q8_0 / Q4_0 / Q4_K, 1..16 tokens): what
// MatVecInt8 and MatVecInt8Fused run on CPUs without the AVX-512 VNNI/VBMI/GFNI path (AMD
// before Zen 4, older Xeons; or forced with TARMAC_ISA=avx2 / avx2-vnni), and for Q4_K on
// every x86 CPU (the AVX-512 kernel has no mins). Internal to the kernels module.
//
// Scheme (same layout as the AVX-512 kernel, quant_interleaved.h): a ymm holds 8 rows × 4
// bytes of one k-group s, so a 16-row group is two halves of 8 int32 lanes, one lane per row.
// Products per half and block:
//   avx2-vnni: vpdpbusd (ymm) of the unsigned quants with the broadcast activations, starting
//              from the offset correction (exactly as the AVX-512 kernel);
//   avx2, Q4_0 / Q4_K: vpmaddubsw of nibbles (0..15) and activations (|q| <= 127) gives
//              pair sums of at most 3810, so all 8 of a block's products add in int16
//              (<= 30480) and one vpmaddwd widens them;
//   avx2, Q8_0: the bytes are made signed again (xor 0x80) and the sign moves onto the
//              activation (vpsignb), so vpmaddubsw sees |w| <= 128 and pair sums stay
//              <= 32512 (no saturation); no offset correction.
// All of them give the exact integer sum of every block, then acc = fma(f32(isum), d_w · d_x,
// acc) in block order per row (Q4_K: d_w = d·sc, then acc = fma(-dmin·m, d_x · sum q, acc)):
// bit-identical to MatMulInt8Ref and to the AVX-512 kernel.
// The token loop runs inside the row-group loop, so each group is read from memory once
// (later tokens and the second half re-read it from L1/L2). One token walks a thread's groups
// two at a time: two weight streams keep more in flight than one (bench/NOTES.md).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "kernels/quant_interleaved.h"
#include "kernels/stream_prefetch.h"

namespace tarmac::kernels::mv8_internal {

// y for row groups [g0, g1) of pk and n_tokens (1..16) tokens: token t's quantized activations
// at xq + t·x_stride (pk.blocks()·32 bytes), its block scales / offset corrections / scaled
// sums at dx / corr / xs + t·pk.blocks() (QuantizeActivationsQ8 with offset 128 for Q8_0, 8
// for Q4_0, 0 for Q4_K; xs is read for Q4_K's mins only);
// token t's row r goes to y[t·y_stride + r]. vnni: use AVX-VNNI (precondition: the CPU has it).
// pf: how the first pass over each group prefetches (dispatch.h, ChooseStreamPrefetch).
// Preconditions: the CPU has AVX2, FMA and F16C.
//
// partner: a second matrix of pk's type and shape with the same activations (a feed-forward
// block's up beside its gate), its rows to partner.y (same y_stride). One token then walks
// group g of pk and group g of the partner as its two streams, so each stream runs on into the
// next call's group (a pass over groups g, g + 1 of one matrix starts one stream cold); more
// tokens run pk's groups, then the partner's.
struct Partner {
  const QuantInterleaved* pk = nullptr;  // none
  float* y = nullptr;
};
void InterleavedGroupsAvx2(const QuantInterleaved& pk, bool vnni, const StreamPrefetch& pf,
                           int64_t n_tokens, const int8_t* xq, int64_t x_stride, const float* dx,
                           const int32_t* corr, const float* xs, float* y, int64_t y_stride,
                           int64_t g0, int64_t g1, const Partner& partner = {});

}  // namespace tarmac::kernels::mv8_internal
