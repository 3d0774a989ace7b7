// The decode passes' prefetch plans (stream_prefetch.h, chosen by dispatch.h's
// ChooseStreamPrefetch): every plan is well-formed, the table names the ones this machine
// runs, and the AVX2 interleaved pass under every vendor's plan (not only this machine's) stays
// bit-identical to MatMulInt8Ref for one token and for several, with nothing written past its
// rows. Prefetching can change speed only; a plan that broke the walk would show here.
#include "kernels/stream_prefetch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dispatch.h"
#include "kernels/matmul_int8.h"
#include "kernels/matvec_int8_avx2.h"
#include "kernels/quant_interleaved.h"

namespace tarmac::kernels {
namespace {

constexpr CpuVendor kVendors[] = {CpuVendor::kIntel, CpuVendor::kAmd, CpuVendor::kOther};
constexpr Isa kPasses[] = {Isa::kAvx2, Isa::kAvx2Vnni, Isa::kAvx512};

TEST(StreamPrefetchTest, EveryPlanIsWellFormed) {
  for (CpuVendor v : kVendors) {
    for (Isa pass : kPasses) {
      const StreamPrefetch pf = ChooseStreamPrefetch(pass, v);
      SCOPED_TRACE(std::string(CpuVendorName(v)) + " " + IsaName(pass));
      EXPECT_GT(pf.l2_ahead, 0);
      EXPECT_EQ(pf.l2_ahead % 64, 0);
      EXPECT_GE(pf.l1_ahead, 0);
      EXPECT_EQ(pf.l1_ahead % 64, 0);
      EXPECT_LT(pf.l1_ahead, pf.l2_ahead) << "the L1 prefetch must trail the L2 one";
      EXPECT_FALSE(DescribeStreamPrefetch(pf).empty());
    }
  }
  // The two memory systems measured want different plans (bench/NOTES.md): Intel spreads its
  // prefetches over the blocks, AMD keeps its per-unit bursts; others get AMD's.
  EXPECT_TRUE(ChooseStreamPrefetch(Isa::kAvx2, CpuVendor::kIntel).spread);
  EXPECT_FALSE(ChooseStreamPrefetch(Isa::kAvx2, CpuVendor::kAmd).spread);
  for (Isa pass : kPasses) {
    const StreamPrefetch amd = ChooseStreamPrefetch(pass, CpuVendor::kAmd);
    const StreamPrefetch other = ChooseStreamPrefetch(pass, CpuVendor::kOther);
    EXPECT_EQ(amd.l2_ahead, other.l2_ahead);
    EXPECT_EQ(amd.l1_ahead, other.l1_ahead);
    EXPECT_EQ(amd.spread, other.spread);
  }
}

TEST(StreamPrefetchTest, TableNamesThePlansThisMachineRuns) {
  if (!Cpu().x86 || !CpuSupports(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  const std::string t = DescribeDispatchTable(Isa::kAvx2);
  EXPECT_NE(t.find("matvec-q6k (" + std::string(CpuVendorName(Cpu().vendor)) + "): " +
                   DescribeStreamPrefetch(ChooseStreamPrefetch(Isa::kAvx2))),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("avx512 pass"), std::string::npos) << "no AVX-512 pass at level avx2";
  EXPECT_EQ(DescribeDispatchTable(Isa::kScalar).find("prefetch"), std::string::npos);
}

TEST(StreamPrefetchTest, EveryPlanKeepsTheAvx2PassBitIdentical) {
  if (!Cpu().x86 || !CpuSupports(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(41);
  const DType types[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K};
  for (DType type : types) {
    const int64_t cols = type == DType::kQ4_K ? 2048 : 2080;  // 2080: a partial unit at the end
    for (int64_t rows : {17, 100}) {
      const auto m = testing::RandomMatrix(type, rows, cols, RowBytes(type, cols), rng);
      const MatrixView w{type, m.data(), rows, cols, RowBytes(type, cols)};
      const auto pk = QuantInterleaved::Pack(w);
      const int64_t nb = pk->blocks();
      for (int64_t tokens : {1, 3}) {
        const auto x = testing::RandomActivations(tokens * cols, rng);
        std::vector<float> ref(tokens * rows);
        MatMulInt8Ref(w, x.data(), tokens, ref.data());
        std::vector<int8_t> xq(tokens * cols);
        std::vector<float> dx(tokens * nb), xs(tokens * nb);
        std::vector<int32_t> corr(tokens * nb);
        for (int64_t t = 0; t < tokens; ++t) {
          QuantizeActivationsQ8(x.data() + t * cols, cols, WeightOffset(type),
                                xq.data() + t * cols, dx.data() + t * nb, corr.data() + t * nb,
                                xs.data() + t * nb);
        }
        for (CpuVendor v : kVendors) {
          for (Isa pass : {Isa::kAvx2, Isa::kAvx2Vnni}) {
            const bool vnni = pass == Isa::kAvx2Vnni;
            if (vnni && !Cpu().avx_vnni) continue;
            SCOPED_TRACE(std::string(DTypeName(type)) + " rows=" + std::to_string(rows) +
                         " tokens=" + std::to_string(tokens) + " " + CpuVendorName(v) + " " +
                         IsaName(pass));
            std::vector<float> got(tokens * rows + 1, NAN);
            got.back() = 12345.0f;
            mv8_internal::InterleavedGroupsAvx2(*pk, vnni, ChooseStreamPrefetch(pass, v), tokens,
                                                xq.data(), cols, dx.data(), corr.data(),
                                                xs.data(), got.data(), rows, 0, pk->groups());
            for (int64_t e = 0; e < tokens * rows; ++e) ASSERT_EQ(got[e], ref[e]) << "at " << e;
            ASSERT_EQ(got.back(), 12345.0f);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tarmac::kernels
