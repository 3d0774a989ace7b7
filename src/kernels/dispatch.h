// The kernel dispatch table: which named kernel computes a weight-matrix product, from the
// weight dtype, the token count, the prepared copy the matrix has, and the ISA level
// (cpu_features.h). MatMul (matmul.h) runs what ChooseMatMulKernel says, the model asks
// WantsInterleavedCopy / WantsAmxCopy which copies to prepare at load, and
// DescribeDispatchTable prints the whole table (`tarmac info`), so "what runs for 12 tokens of
// Q4_K on this CPU?" is answered here and nowhere else.
//
// Pure functions of their arguments (and, for the defaults, of ActiveIsa()); thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu_features.h"
#include "kernels/stream_prefetch.h"
#include "tensor/dtype.h"
#include "tensor/view.h"  // PreparedLayout

namespace tarmac::kernels {

enum class MatMulKernel {
  kMatVec,           // 1 token: f32 accumulation, int16 activations for quantized rows (matvec.h)
  kMatVecInt8,       // 1 token, Q8_0/Q4_0 GGUF layout, AVX-512 VNNI (matvec_int8.h)
  kInterleavedInt8,  // 1..16 tokens, Q8_0/Q4_0/Q4_K interleaved copy (matvec_int8.h)
  kMatVecQ6K,        // a few tokens, Q6_K GGUF layout, int8 activations, AVX2 (matvec_q6k.h)
  kMatVecMulti,      // 2..16 tokens, rows streamed once (matvec_multi.h)
  kMatVecBlocks,     // 1..16 tokens, Q2_K/Q3_K/Q5_K/IQ4/MXFP4/legacy/TQ blocks, AVX2 (matvec_blocks.h)
  kMatMulInt8,       // GEMM with int8 activations, Q8_0/Q4_0/Q4_K (matmul_int8.h)
  kMatMulQ6K,        // GEMM with int8 activations, Q6_K GGUF layout, AVX2 (matmul_q6k.h)
  kMatMulAmx,        // GEMM on AMX tiles, split-bf16 (matmul_amx.h)
  kMatMulPanels,     // GEMM on f32 panels, Highway; every token count of f16 with a panel copy (matmul.h)
};

// What decides the kernel. n_tokens >= 1.
struct MatMulCase {
  DType type;
  int64_t n_tokens;
  PreparedLayout prepared = PreparedLayout::kNone;
};

MatMulKernel ChooseMatMulKernel(const MatMulCase& c, Isa isa);
inline MatMulKernel ChooseMatMulKernel(const MatMulCase& c) {
  return ChooseMatMulKernel(c, ActiveIsa());
}

// "matvec", "matvec-int8", "interleaved-int8", ...; with the code path it takes at a level
// for weights of a type ("interleaved-int8 [avx2]", "matmul-int8 [amx-int8]", "matvec
// [AVX3_SPR]").
const char* MatMulKernelName(MatMulKernel k);
std::string MatMulKernelVariant(MatMulKernel k, DType type, int64_t n_tokens, Isa isa);

// The pass the interleaved int8 products (kInterleavedInt8) run for n_tokens tokens of type at
// a level: kAvx512 (the AVX-512 VNNI pass; not Q4_K, whose mins it lacks), else kAvx2Vnni
// (AVX-VNNI on ymm, where the CPU has it) or kAvx2. One token on an Intel CPU with AVX-VNNI
// takes the 256-bit pass even where the AVX-512 one runs: its two streams with run-off skips
// read more of the bandwidth there (bench/NOTES.md); elsewhere the one-token pass is
// unmeasured against it and stays AVX-512. Preconditions: n_tokens >= 1.
Isa InterleavedPass(DType type, int64_t n_tokens, Isa isa, CpuVendor vendor);
inline Isa InterleavedPass(DType type, int64_t n_tokens) {
  return InterleavedPass(type, n_tokens, ActiveIsa(), Cpu().vendor);
}

// Which copies a model prepares at load for a matrix of this dtype (used when one exists).
bool WantsInterleavedCopy(DType type, Isa isa);
bool WantsAmxCopy(DType type, Isa isa);
// F16 GEMM on f32 panels, read from a panel-order copy (x86 with F16C, no AMX).
bool WantsPanelCopy(DType type, Isa isa);
inline bool WantsInterleavedCopy(DType type) { return WantsInterleavedCopy(type, ActiveIsa()); }
inline bool WantsAmxCopy(DType type) { return WantsAmxCopy(type, ActiveIsa()); }
inline bool WantsPanelCopy(DType type) { return WantsPanelCopy(type, ActiveIsa()); }

// How a decode pass prefetches its weight stream: pass is the level its code runs at (kAvx512
// for the interleaved-int8 AVX-512 VNNI pass; kAvx2 or kAvx2Vnni for the interleaved AVX2
// passes, which Q4_K takes at every level, and for matvec-q6k, which uses the distances).
// Measured per vendor (bench/NOTES.md); other vendors get AMD's.
StreamPrefetch ChooseStreamPrefetch(Isa pass, CpuVendor vendor);
inline StreamPrefetch ChooseStreamPrefetch(Isa pass) {
  return ChooseStreamPrefetch(pass, Cpu().vendor);
}
// "per block, L2 3072 B ahead, L1 2048 B ahead" / "per unit (burst), L2 6144 B ahead".
std::string DescribeStreamPrefetch(const StreamPrefetch& pf);

// The table at a level, for the weight dtypes of a model (F32, F16, BF16, Q8_0, Q4_0, Q4_K,
// Q6_K) with the copies a model prepares at that level: per dtype, token ranges and their
// kernels. Multi-line text ending in a newline.
std::string DescribeDispatchTable(Isa isa);

}  // namespace tarmac::kernels
