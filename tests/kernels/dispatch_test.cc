// The ISA override (cpu_features.h) and the kernel dispatch table (dispatch.h): levels parse
// and clamp to the CPU, the override reaches Highway and every path predicate, ScopedIsa
// restores, and the table routes each (dtype, tokens, prepared copy) where the kernels' own
// headers say (the kernels themselves are checked against their references at every level in
// their own tests, through testing::ForEachIsa).
#include "kernels/dispatch.h"

#include "kernels/matmul_q6k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>

#include "hwy/targets.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_int8_amx.h"
#include "kernels/matvec_int8.h"

namespace tarmac::kernels {
namespace {

TEST(CpuFeaturesTest, LevelsParseAndName) {
  for (Isa isa : kAllIsas) EXPECT_EQ(ParseIsa(IsaName(isa)), isa);
  EXPECT_FALSE(ParseIsa("AVX2").has_value());
  EXPECT_FALSE(ParseIsa("").has_value());
  EXPECT_FALSE(ParseIsa("avx512f").has_value());
}

TEST(CpuFeaturesTest, NativeLevelMatchesFeatures) {
  const CpuFeatures& f = Cpu();
  const Isa n = NativeIsa();
  EXPECT_EQ(n >= Isa::kAvx2, f.avx2 && f.fma && f.f16c);
  if (n >= Isa::kAvx512) {
    EXPECT_TRUE(f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni);
  }
  if (n >= Isa::kAmx) {
    EXPECT_TRUE(f.amx_tile && f.amx_int8 && f.amx_bf16 && f.amx_os);
  }
  std::printf("cpu: %s; native level %s\n", DescribeCpu().c_str(), IsaName(n));
}

TEST(CpuFeaturesTest, OverrideReachesEveryPredicateAndRestores) {
  const Isa before = ActiveIsa();
  for (Isa isa : kAllIsas) {
    {
      const ScopedIsa forced(isa);
      const Isa want = std::min(isa, NativeIsa());
      EXPECT_EQ(ActiveIsa(), want) << IsaName(isa);
      EXPECT_EQ(AmxEnabled(), want >= Isa::kAmx);
      EXPECT_EQ(AmxInt8Usable(), want >= Isa::kAmx);
      if (want < Isa::kAvx512) {
        EXPECT_FALSE(Int8MatVecFast());
      }
      if (Cpu().x86) {
        EXPECT_EQ(InterleavedInt8Available(), want >= Isa::kAvx2);
      }
      const std::string path = Int8MatMulPath();
      const char* expect = want >= Isa::kAmx      ? "amx-int8"
                           : want >= Isa::kAvx512 ? "avx512vnni"
                           : want >= Isa::kAvx2Vnni && Cpu().avx_vnni ? "avx2-vnni"
                           : want >= Isa::kAvx2   ? "avx2"
                                                  : "scalar";
      if (Cpu().x86) {
        EXPECT_EQ(path, expect) << IsaName(isa);
      }
      // Highway follows: the portable kernels' target.
      if (want < Isa::kAvx512 && want >= Isa::kAvx2) {
        EXPECT_EQ(std::string(HighwayTargetName(want)), "AVX2");
        EXPECT_EQ(MatMulHwyTarget(), HWY_AVX2);
      }
      if (want == Isa::kScalar) {
        EXPECT_GT(MatMulHwyTarget(), HWY_AVX2);
      }
    }
    EXPECT_EQ(ActiveIsa(), before);
  }
}

TEST(DispatchTest, TableRoutesAsTheKernelsSay) {
  using K = MatMulKernel;
  using P = PreparedLayout;
  const Isa native = NativeIsa();
  // Scalar: everything portable; an interleaved copy is read only by the int8 GEMM.
  EXPECT_EQ(ChooseMatMulKernel({DType::kQ4_0, 1, P::kNone}, Isa::kScalar), K::kMatVec);
  EXPECT_EQ(ChooseMatMulKernel({DType::kQ4_0, 1, P::kInterleaved}, Isa::kScalar), K::kMatMulInt8);
  EXPECT_EQ(ChooseMatMulKernel({DType::kQ4_0, 5, P::kInterleaved}, Isa::kScalar), K::kMatMulInt8);
  EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 5, P::kNone}, Isa::kScalar), K::kMatVecMulti);
  EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 17, P::kNone}, Isa::kScalar), K::kMatMulPanels);
  EXPECT_EQ(ChooseMatMulKernel({DType::kQ4_K, 12, P::kNone}, Isa::kScalar), K::kMatMulInt8);
  EXPECT_EQ(ChooseMatMulKernel({DType::kQ6_K, 12, P::kNone}, Isa::kScalar), K::kMatVecMulti);
  EXPECT_FALSE(WantsInterleavedCopy(DType::kQ8_0, Isa::kScalar));
  EXPECT_FALSE(WantsAmxCopy(DType::kF16, Isa::kScalar));
  if (native >= Isa::kAvx2 && Cpu().x86) {
    // AVX2: Q8_0 / Q4_0 / Q4_K decode and small batches on the interleaved copy.
    for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K}) {
      EXPECT_TRUE(WantsInterleavedCopy(t, Isa::kAvx2)) << DTypeName(t);
      for (int64_t n : {1, 2, 8, 16}) {
        EXPECT_EQ(ChooseMatMulKernel({t, n, P::kInterleaved}, Isa::kAvx2), K::kInterleavedInt8)
            << DTypeName(t) << " " << n;
      }
      EXPECT_EQ(ChooseMatMulKernel({t, 17, P::kInterleaved}, Isa::kAvx2), K::kMatMulInt8);
    }
    EXPECT_FALSE(WantsInterleavedCopy(DType::kQ6_K, Isa::kAvx2));
    // F16 with its panel copy: the panels at every token count (batch-invariant products);
    // without one, the row kernels for a few tokens.
    EXPECT_TRUE(WantsPanelCopy(DType::kF16, Isa::kAvx2));
    for (int64_t n : {1, 2, 3, 16, 17, 512}) {
      EXPECT_EQ(ChooseMatMulKernel({DType::kF16, n, P::kF16Panels}, Isa::kAvx2), K::kMatMulPanels) << n;
    }
    EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 1, P::kNone}, Isa::kAvx2), K::kMatVec);
    EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 2, P::kNone}, Isa::kAvx2), K::kMatVecMulti);
    // Q6_K: its GGUF blocks with int8 activations, row by row for a few tokens, then the
    // GEMM that unpacks them into slabs per call.
    for (int64_t n = 1; n < kQ6KGemmMinTokens; ++n) {
      EXPECT_EQ(ChooseMatMulKernel({DType::kQ6_K, n, P::kNone}, Isa::kAvx2), K::kMatVecQ6K) << n;
    }
    for (int64_t n : {kQ6KGemmMinTokens, int64_t{16}, int64_t{17}, int64_t{512}}) {
      EXPECT_EQ(ChooseMatMulKernel({DType::kQ6_K, n, P::kNone}, Isa::kAvx2), K::kMatMulQ6K) << n;
    }
    EXPECT_EQ(MatMulKernelVariant(K::kMatVecQ6K, DType::kQ6_K, 1, Isa::kAvx2), "matvec-q6k [avx2]");
    EXPECT_EQ(MatMulKernelVariant(K::kMatMulQ6K, DType::kQ6_K, 32, Isa::kAvx2), "matmul-q6k [avx2]");
    EXPECT_EQ(ChooseMatMulKernel({DType::kQ4_K, 1, P::kNone}, Isa::kAvx2), K::kMatVec);
    EXPECT_EQ(MatMulKernelVariant(K::kInterleavedInt8, DType::kQ8_0, 1, Isa::kAvx2),
              "interleaved-int8 [avx2]");
    EXPECT_EQ(MatMulKernelVariant(K::kMatMulInt8, DType::kQ8_0, 32, Isa::kAvx2), "matmul-int8 [avx2]");
    // Q4_K's mins run on the AVX2 kernel at every level (the AVX-512 one has none).
    EXPECT_EQ(MatMulKernelVariant(K::kInterleavedInt8, DType::kQ4_K, 4, native).rfind("interleaved-int8 [avx2", 0), 0u);
  }
  if (native >= Isa::kAmx) {
    EXPECT_TRUE(WantsAmxCopy(DType::kF16, Isa::kAmx));
    EXPECT_FALSE(WantsAmxCopy(DType::kQ4_0, Isa::kAmx));
    EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 6, P::kAmxSplit}, Isa::kAmx), K::kMatVecMulti);
    EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 7, P::kAmxSplit}, Isa::kAmx), K::kMatMulAmx);
    EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 16, P::kNone}, Isa::kAmx), K::kMatVecMulti);
    EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 17, P::kNone}, Isa::kAmx), K::kMatMulAmx);
    EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 17, P::kNone}, Isa::kAvx512), K::kMatMulPanels);
    EXPECT_EQ(MatMulKernelVariant(K::kMatMulInt8, DType::kQ8_0, 32, Isa::kAmx), "matmul-int8 [amx-int8]");
  }
  // The interleaved pass: AVX2 (AVX-VNNI where the CPU has it) below AVX-512 and for Q4_K;
  // AVX-512 for 2-16 tokens where it runs, and for one token except on Intel CPUs with
  // AVX-VNNI, which take the 256-bit pass.
  if (Cpu().x86 && native >= Isa::kAvx2) {
    const Isa pass256 = Cpu().avx_vnni ? Isa::kAvx2Vnni : Isa::kAvx2;
    for (CpuVendor v : {CpuVendor::kIntel, CpuVendor::kAmd}) {
      EXPECT_EQ(InterleavedPass(DType::kQ4_0, 1, Isa::kAvx2, v), Isa::kAvx2);
      for (int64_t n : {1, 2, 16}) EXPECT_EQ(InterleavedPass(DType::kQ4_K, n, native, v), pass256);
      if (!Int8MatVecFast()) continue;  // (at the native level)
      for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
        for (int64_t n : {2, 9, 16}) EXPECT_EQ(InterleavedPass(t, n, native, v), Isa::kAvx512);
        const bool narrow = v == CpuVendor::kIntel && Cpu().avx_vnni;
        EXPECT_EQ(InterleavedPass(t, 1, native, v), narrow ? Isa::kAvx2Vnni : Isa::kAvx512);
      }
    }
  }
  // A level above the CPU's is clamped to it.
  EXPECT_EQ(ChooseMatMulKernel({DType::kF16, 17, P::kNone}, Isa::kAmx),
            ChooseMatMulKernel({DType::kF16, 17, P::kNone}, native));
}

TEST(DispatchTest, DescribesEveryDtypeAtEveryLevel) {
  for (Isa isa : kAllIsas) {
    const std::string t = DescribeDispatchTable(isa);
    const char* const names[] = {"f32",  "f16",  "bf16", "q8_0",   "q4_0",  "q4_K",
                                 "q6_K", "q5_K", "q3_K", "q2_K", "iq4_xs", "mxfp4"};
    for (const char* name : names) {
      EXPECT_NE(t.find(std::string("  ") + name + " "), std::string::npos) << name << "\n" << t;
    }
    // Every dtype's last range is open-ended ("17+: ...").
    size_t open_ranges = 0;
    for (size_t at = t.find("+: "); at != std::string::npos; at = t.find("+: ", at + 1)) ++open_ranges;
    EXPECT_EQ(open_ranges, std::size(names)) << t;
  }
  std::printf("%s", DescribeDispatchTable(ActiveIsa()).c_str());
}

}  // namespace
}  // namespace tarmac::kernels
