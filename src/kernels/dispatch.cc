// The kernel dispatch table (see dispatch.h).

#include "kernels/dispatch.h"

#include <algorithm>
#include <cstdio>

#include "base/check.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_int8_paths.h"
#include "kernels/matmul_q6k.h"
#include "kernels/matvec_blocks.h"
#include "kernels/matvec_int8.h"
#include "kernels/matvec_multi.h"
#include "kernels/matvec_q6k.h"
#include "kernels/panel_packed_matrix.h"
#include "kernels/quant_interleaved.h"

namespace tarmac::kernels {
namespace {

Isa Clamp(Isa isa) { return std::min(isa, NativeIsa()); }

// The AVX-512 VNNI + VBMI + GFNI decode kernels (Int8MatVecFast at this level).
bool Avx512Int8(Isa isa) { return isa >= Isa::kAvx512 && Cpu().avx512vbmi && Cpu().gfni; }
// The interleaved products (InterleavedInt8Available at this level).
bool Interleaved(Isa isa) { return Cpu().x86 && isa >= Isa::kAvx2; }
bool Amx(Isa isa) { return isa >= Isa::kAmx; }
// The Q6_K int8 products (MatVecQ6KAvailable and MatMulQ6KAvailable at this level).
bool Q6K(Isa isa) { return Cpu().x86 && isa >= Isa::kAvx2; }
// The other block types' int8 products (MatVecBlocksAvailable at this level).
bool Blocks(Isa isa) { return Cpu().x86 && isa >= Isa::kAvx2; }

}  // namespace

MatMulKernel ChooseMatMulKernel(const MatMulCase& c, Isa isa) {
  isa = Clamp(isa);
  const bool int8_vec = IsInt8MatVecType(c.type);
  const bool interleaved =
      c.prepared == PreparedLayout::kInterleaved && QuantInterleaved::Supports(c.type);
  // Q6_K has no prepared copy: its int8 products read the GGUF blocks.
  const bool q6k = c.type == DType::kQ6_K && Q6K(isa);
  // The other block types without a copy: int8 products from their GGUF blocks.
  const bool blocks = MatVecBlocksSupports(c.type) && Blocks(isa);
  const int64_t amx_min =
      c.prepared == PreparedLayout::kAmxSplit ? kAmxPackedMinTokens : kAmxPlainMinTokens;
  // F16 with a panel copy: the panels for every token count. Each output is then one FMA chain
  // over k whatever the step's token count, so a sequence's logits do not depend on what it
  // was batched with (seeded sampling repeats); the short tiles also beat the row kernels.
  if (c.prepared == PreparedLayout::kF16Panels) return MatMulKernel::kMatMulPanels;
  if (c.n_tokens <= 1) {
    if (interleaved && Interleaved(isa)) return MatMulKernel::kInterleavedInt8;
    if (int8_vec && Avx512Int8(isa)) return MatMulKernel::kMatVecInt8;
    if (q6k) return MatMulKernel::kMatVecQ6K;
    if (blocks) return MatMulKernel::kMatVecBlocks;
    // A matrix with an interleaved copy may have released its GGUF bytes: only the int8
    // kernels read the copy.
    return interleaved ? MatMulKernel::kMatMulInt8 : MatMulKernel::kMatVec;
  }
  // A few tokens (small decode batches, speculative verification) are still bound by reading
  // the weights: stream each row once rather than pack a copy of the whole matrix, until AMX
  // tiles win (from kAmxPackedMinTokens with pre-split weights, kAmxPlainMinTokens without:
  // splitting per call loses to MatVecMulti up to 16; bench/NOTES.md).
  if (c.n_tokens <= kInterleavedMaxTokens && interleaved && Interleaved(isa)) {
    return MatMulKernel::kInterleavedInt8;
  }
  // Q6_K: row by row from its GGUF blocks for a few tokens, then the int8 GEMM that unpacks
  // them per call; AMX machines keep the rows up to their tiles' minimum, then the tiles.
  if (q6k && c.n_tokens < kQ6KGemmMinTokens) return MatMulKernel::kMatVecQ6K;
  if (q6k && !Amx(isa)) return MatMulKernel::kMatMulQ6K;
  if (q6k && c.n_tokens <= kQ6KMaxTokens && c.n_tokens < amx_min) return MatMulKernel::kMatVecQ6K;
  if (blocks && c.n_tokens <= kBlocksMaxTokens && !(Amx(isa) && c.n_tokens >= amx_min)) {
    return MatMulKernel::kMatVecBlocks;
  }
  if (c.n_tokens <= kMatVecMultiMaxTokens && !IsInt8MatMulType(c.type) &&
      !(Amx(isa) && c.n_tokens >= amx_min)) {
    return MatMulKernel::kMatVecMulti;
  }
  // Q8_0 / Q4_0 / Q4_K: int8 activations and integer dot products.
  if (IsInt8MatMulType(c.type)) return MatMulKernel::kMatMulInt8;
  // Everything else on AMX tiles where the CPU has them (split-bf16, ~f32 exact).
  if (Amx(isa)) return MatMulKernel::kMatMulAmx;
  return MatMulKernel::kMatMulPanels;
}

const char* MatMulKernelName(MatMulKernel k) {
  switch (k) {
    case MatMulKernel::kMatVec: return "matvec";
    case MatMulKernel::kMatVecInt8: return "matvec-int8";
    case MatMulKernel::kInterleavedInt8: return "interleaved-int8";
    case MatMulKernel::kMatVecQ6K: return "matvec-q6k";
    case MatMulKernel::kMatVecMulti: return "matvec-multi";
    case MatMulKernel::kMatVecBlocks: return "matvec-blocks";
    case MatMulKernel::kMatMulInt8: return "matmul-int8";
    case MatMulKernel::kMatMulQ6K: return "matmul-q6k";
    case MatMulKernel::kMatMulAmx: return "matmul-amx";
    case MatMulKernel::kMatMulPanels: return "matmul-panels";
  }
  return "?";
}

Isa InterleavedPass(DType type, int64_t n_tokens, Isa isa, CpuVendor vendor) {
  TARMAC_CHECK(n_tokens >= 1);
  isa = Clamp(isa);
  const Isa pass256 = isa >= Isa::kAvx2Vnni && Cpu().avx_vnni ? Isa::kAvx2Vnni : Isa::kAvx2;
  if (!Avx512Int8(isa) || type == DType::kQ4_K) return pass256;
  if (n_tokens == 1 && vendor == CpuVendor::kIntel && pass256 == Isa::kAvx2Vnni) return pass256;
  return Isa::kAvx512;
}

std::string MatMulKernelVariant(MatMulKernel k, DType type, int64_t n_tokens, Isa isa) {
  isa = Clamp(isa);
  std::string path;
  switch (k) {
    case MatMulKernel::kMatVec:
    case MatMulKernel::kMatVecMulti:
    case MatMulKernel::kMatMulPanels:
      path = HighwayTargetName(isa);
      break;
    case MatMulKernel::kMatVecInt8:
      path = "avx512-vnni";
      break;
    case MatMulKernel::kMatVecQ6K:
    case MatMulKernel::kMatMulQ6K:
    case MatMulKernel::kMatVecBlocks:
      path = "avx2";
      break;
    case MatMulKernel::kInterleavedInt8: {
      const Isa pass = InterleavedPass(type, n_tokens, isa, Cpu().vendor);
      path = pass == Isa::kAvx512 ? "avx512-vnni" : pass == Isa::kAvx2Vnni ? "avx2-vnni" : "avx2";
      break;
    }
    case MatMulKernel::kMatMulInt8: {
      const int8_internal::Path* p = int8_internal::BestX86Path(isa);
      path = p != nullptr ? p->name : "scalar";
      break;
    }
    case MatMulKernel::kMatMulAmx:
      path = "amx-bf16";
      break;
  }
  return std::string(MatMulKernelName(k)) + " [" + path + "]";
}

bool WantsInterleavedCopy(DType type, Isa isa) {
  return QuantInterleaved::Supports(type) && Interleaved(Clamp(isa));
}

bool WantsAmxCopy(DType type, Isa isa) { return !IsInt8MatMulType(type) && Amx(Clamp(isa)); }

bool WantsPanelCopy(DType type, Isa isa) {
  isa = Clamp(isa);
  return PanelPackedMatrix::Supports(type) && Cpu().x86 && isa >= Isa::kAvx2 && !Amx(isa);
}

StreamPrefetch ChooseStreamPrefetch(Isa pass, CpuVendor vendor) {
  TARMAC_CHECK(pass >= Isa::kAvx2);
  const bool avx512 = pass >= Isa::kAvx512;
  if (vendor == CpuVendor::kIntel) {
    // Bursts of a whole unit stall the loads behind them, past ~3 KiB the prefetches outrun
    // what a core tracks, and the loads want their lines in L1 a few blocks ahead (the AVX2
    // passes, walking two groups at once, further ahead).
    return avx512 ? StreamPrefetch{.l2_ahead = 3072, .l1_ahead = 1024, .spread = true}
                  : StreamPrefetch{.l2_ahead = 3072, .l1_ahead = 2048, .spread = true};
  }
  // AMD (Zen 5): bursts and spread prefetches stream alike; the AVX2 loop wants 6 KiB.
  return avx512 ? StreamPrefetch{.l2_ahead = 3072, .l1_ahead = 0, .spread = false}
                : StreamPrefetch{.l2_ahead = 6144, .l1_ahead = 0, .spread = false};
}

std::string DescribeStreamPrefetch(const StreamPrefetch& pf) {
  std::string s = pf.spread ? "per block" : "per unit (burst)";
  s += ", L2 " + std::to_string(pf.l2_ahead) + " B ahead";
  if (pf.l1_ahead > 0) s += ", L1 " + std::to_string(pf.l1_ahead) + " B ahead";
  return s;
}

std::string DescribeDispatchTable(Isa isa) {
  const Isa level = Clamp(isa);
  std::string out = std::string("kernel dispatch at level ") + IsaName(level) + " (native " +
                    IsaName(NativeIsa()) + "; TARMAC_ISA lowers it)\n";
  const DType types[] = {DType::kF32,  DType::kF16,   DType::kBF16,   DType::kQ8_0,
                         DType::kQ4_0, DType::kQ4_K,  DType::kQ6_K,   DType::kQ5_K,
                         DType::kQ3_K, DType::kQ2_K,  DType::kIQ4_XS, DType::kMXFP4};
  constexpr int64_t kScan = 64;  // past every threshold
  for (DType t : types) {
    const PreparedLayout prep = WantsInterleavedCopy(t, level) ? PreparedLayout::kInterleaved
                                : WantsAmxCopy(t, level)       ? PreparedLayout::kAmxSplit
                                : WantsPanelCopy(t, level)     ? PreparedLayout::kF16Panels
                                                               : PreparedLayout::kNone;
    char head[64];
    std::snprintf(head, sizeof head, "  %-6s %-12s", std::string(DTypeName(t)).c_str(),
                  prep == PreparedLayout::kInterleaved ? "interleaved"
                  : prep == PreparedLayout::kAmxSplit  ? "amx-split"
                  : prep == PreparedLayout::kF16Panels ? "f16-panels"
                                                       : "gguf");
    out += head;
    int64_t start = 1;
    for (int64_t n = 1; n <= kScan; ++n) {
      const MatMulKernel k = ChooseMatMulKernel({t, n, prep}, level);
      const std::string variant = MatMulKernelVariant(k, t, n, level);
      if (n < kScan &&
          MatMulKernelVariant(ChooseMatMulKernel({t, n + 1, prep}, level), t, n + 1, level) ==
              variant) {
        continue;
      }
      char range[32];
      if (n == kScan) {
        std::snprintf(range, sizeof range, "%lld+", static_cast<long long>(start));
      } else if (n == start) {
        std::snprintf(range, sizeof range, "%lld", static_cast<long long>(n));
      } else {
        std::snprintf(range, sizeof range, "%lld-%lld", static_cast<long long>(start),
                      static_cast<long long>(n));
      }
      out += std::string("  ") + range + ": " + variant;
      start = n + 1;
    }
    out += '\n';
  }
  if (Interleaved(level)) {
    const std::string vendor = CpuVendorName(Cpu().vendor);
    if (Avx512Int8(level)) {
      out += "  decode prefetch, avx512 pass of interleaved-int8 (" + vendor +
             "): " + DescribeStreamPrefetch(ChooseStreamPrefetch(Isa::kAvx512)) + '\n';
    }
    out += "  decode prefetch, avx2 passes of interleaved-int8 and matvec-q6k (" + vendor +
           "): " + DescribeStreamPrefetch(ChooseStreamPrefetch(Isa::kAvx2)) + '\n';
  }
  return out;
}

}  // namespace tarmac::kernels
