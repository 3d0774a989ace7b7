// SIMD kernels of kernels/ops.h against the scalar references of kernels/ops_ref.h, plus
// known-value and algebraic tests (RoPE composition, NORM/NEOX permutation, ...).
//
// Tolerances (error = |fast − ref|, ref computed in double):
//   Add, Mul, Scale, Max, ArgMax, conversions: bit-exact. Axpy: bit-exact to fma(a, x, y), or
//     to a·x + y rounded twice on targets without FMA (SSE4 and below).
//   RmsNorm: 1e-6·|ref| (f32 sum of squares + two f32 multiplies).
//   Softmax(/Scaled): 4e-6·|ref| + 1e-6 (Highway Exp is ≤ 1 ULP; the f32 argument x·s − max·s
//     carries an absolute rounding error that only matters for outputs far below 1e-6).
//   Silu, SwiGlu: 4e-6·|ref| + 1e-37 (Exp 1 ULP + a division; the absolute floor covers
//     results that underflow into f32 subnormals, where Exp is not ULP-accurate).
//   Gelu: 3e-5·|ref| + 1e-37: in the far negative tail gelu ≈ x·exp(2u) with |2u| up to ~88,
//     and the f32 rounding of u (cubic term) is amplified by |2u| (measured ≤ ~1e-5 there;
//     ~2e-7 for |x| < 5).
//   GeGlu: Gelu's bound (one more exact-to-rounding multiply).
//   SoftCap: 4e-6·|ref| + 1e-37 (Highway Tanh is a few ULP; the scaling by 1/cap and cap).
//   DotF32, SumF32, StreamSumF32: 1e-6·Σ|terms| (f32 accumulation across 4 vector accumulators).
//   RopeCache vs RopeNorm/RopeNeox: 1e-6·max|x| (cos/sin rounded to f32, f32 FMA rotation).
// Each tolerance test prints the largest error it saw so regressions in accuracy are visible.

#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/ops_ref.h"
#include "tensor/fp16.h"

namespace tarmac::kernels {
namespace {

// Every test runs once per SIMD target that was compiled and that this CPU supports (SCALAR,
// SSE4, AVX2, AVX-512, ...), so each vector length's tail handling is exercised.
class OpsTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  }
};

INSTANTIATE_TEST_SUITE_P(Targets, OpsTest, ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string(hwy::TargetName(info.param));
                         });

constexpr int64_t kSizes[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 64, 65, 127, 1000, 4097};
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Random(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Tracks the worst error relative to a tolerance and reports the first violation.
struct ErrorStats {
  const char* name;
  double max_rel = 0.0;  // max |got − want| / |want| over entries with |want| > 1e-30
  double max_abs = 0.0;
  ~ErrorStats() {
    std::printf("[ %s ] max rel err %.3g, max abs err %.3g\n", name, max_rel, max_abs);
  }
  void Check(float got, double want, double rtol, double atol, const char* what, int64_t n,
             int64_t i) {
    const double err = std::fabs(static_cast<double>(got) - want);
    max_abs = std::max(max_abs, err);
    if (std::fabs(want) > 1e-30) max_rel = std::max(max_rel, err / std::fabs(want));
    ASSERT_LE(err, rtol * std::fabs(want) + atol)
        << what << " n=" << n << " i=" << i << " got " << got << " want " << want;
  }
};

// ------------------------------------------------------------------ RmsNorm

TEST_P(OpsTest, RmsNormMatchesReference) {
  ErrorStats st{"RmsNorm"};
  for (float mag : {1e-3f, 1.0f, 1e3f}) {
    for (int64_t n : kSizes) {
      const auto x = Random(n, mag, 1 + n);
      const auto w = Random(n, 2.0f, 2 + n);
      std::vector<float> want(n), got(n);
      ref::RmsNorm(x.data(), w.data(), n, 1e-5f, want.data());
      RmsNorm(x.data(), w.data(), n, 1e-5f, got.data());
      for (int64_t i = 0; i < n; ++i) st.Check(got[i], want[i], 1e-6, 1e-37, "rmsnorm", n, i);
      std::vector<float> inplace = x;  // out aliases x
      RmsNorm(inplace.data(), w.data(), n, 1e-5f, inplace.data());
      ASSERT_EQ(inplace, got);
    }
  }
}

TEST_P(OpsTest, RmsNormKnownValues) {
  // A constant vector c normalises to sign(c)·w (eps = 0).
  const int64_t n = 37;
  std::vector<float> x(n, -3.5f), w(n), out(n);
  for (int64_t i = 0; i < n; ++i) w[i] = 0.5f + i;
  RmsNorm(x.data(), w.data(), n, 0.0f, out.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], -w[i], 1e-6 * w[i]);
  // Subnormal inputs: eps dominates, out = x / sqrt(eps) · w, no NaN or inf.
  std::vector<float> tiny(n, 1e-40f);
  std::vector<float> ones(n, 1.0f);
  RmsNorm(tiny.data(), ones.data(), n, 1e-6f, out.data());
  for (float v : out) EXPECT_NEAR(v, 1e-40 / 1e-3, 1e-42);
}

// ------------------------------------------------------------------ Softmax

void CheckSoftmax(float scale, ErrorStats& st) {
  for (float mag : {1e-39f, 1.0f, 30.0f, 1e4f}) {  // 1e-39: subnormal; 1e4: exp(x) overflows
    for (int64_t n : kSizes) {
      auto x = Random(n, mag, 3 + n);
      for (int64_t i = 0; i < n; i += 5) x[i] = -kInf;  // masked positions
      if (n > 1) x[n - 1] = -kInf;                      // masked tail lane
      auto want = x, got = x;
      if (scale == 1.0f) {
        ref::Softmax(want.data(), n);
        Softmax(got.data(), n);
      } else {
        ref::SoftmaxScaled(want.data(), n, scale);
        SoftmaxScaled(got.data(), n, scale);
      }
      double sum = 0.0;
      const bool any_finite = std::any_of(x.begin(), x.end(), [](float v) { return v != -kInf; });
      for (int64_t i = 0; i < n; ++i) {
        st.Check(got[i], want[i], 4e-6, 1e-6, "softmax", n, i);
        if (x[i] == -kInf) {
          ASSERT_EQ(got[i], 0.0f);
        }
        sum += got[i];
      }
      EXPECT_NEAR(sum, any_finite ? 1.0 : 0.0, 1e-5) << n;
    }
  }
}

TEST_P(OpsTest, SoftmaxMatchesReference) {
  ErrorStats st{"Softmax"};
  CheckSoftmax(1.0f, st);
}

// LogSumExp: |got - ref| <= 2e-6·|ref| + 4e-6 (f32 sum of exps, each ≤ 1 ULP; log of a sum
// >= 1 loses nothing further).
TEST_P(OpsTest, LogSumExpMatchesReference) {
  ErrorStats st{"LogSumExp"};
  for (float mag : {1e-39f, 1.0f, 30.0f, 1e4f}) {
    for (int64_t n : kSizes) {
      auto x = Random(n, mag, 5 + n);
      for (int64_t i = 0; i < n; i += 7) x[i] = -kInf;
      const double want = ref::LogSumExp(x.data(), n);
      const float got = LogSumExp(x.data(), n);
      if (std::isinf(want)) {
        ASSERT_EQ(got, -kInf) << n;
        continue;
      }
      st.Check(got, want, 2e-6, 4e-6, "logsumexp", n, 0);
    }
  }
  EXPECT_EQ(LogSumExp(nullptr, 0), -kInf);
}

TEST_P(OpsTest, SoftmaxScaledMatchesReference) {
  ErrorStats st{"SoftmaxScaled"};
  CheckSoftmax(0.125f, st);
  CheckSoftmax(3.0f, st);
}

TEST_P(OpsTest, SoftmaxEdgeCases) {
  for (int64_t n : kSizes) {
    std::vector<float> x(n, -kInf);
    Softmax(x.data(), n);  // fully masked row: all zeros by definition
    for (float v : x) ASSERT_EQ(v, 0.0f) << n;
    std::vector<float> c(n, 7.25f);
    SoftmaxScaled(c.data(), n, 0.5f);
    for (float v : c) ASSERT_NEAR(v, 1.0 / n, 1e-6 / n) << n;
  }
  Softmax(nullptr, 0);
  std::vector<float> one = {-1e30f};
  Softmax(one.data(), 1);
  EXPECT_EQ(one[0], 1.0f);
}

// ------------------------------------------------------------------ activations

TEST_P(OpsTest, ActivationsMatchReference) {
  ErrorStats silu{"Silu"}, swiglu{"SwiGlu"}, gelu{"Gelu"}, geglu{"GeGlu"}, softcap{"SoftCap"};
  for (float mag : {1e-39f, 1.0f, 20.0f, 100.0f, 1e30f}) {  // ±100: exp(100) overflows f32
    for (int64_t n : kSizes) {
      const auto x = Random(n, mag, 5 + n);
      const auto up = Random(n, 3.0f, 6 + n);
      std::vector<float> want(n), got(n);
      ref::Silu(x.data(), want.data(), n);
      Silu(x.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) silu.Check(got[i], want[i], 4e-6, 1e-37, "silu", n, i);
      ref::SwiGlu(x.data(), up.data(), want.data(), n);
      SwiGlu(x.data(), up.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) swiglu.Check(got[i], want[i], 4e-6, 1e-37, "swiglu", n, i);
      std::vector<float> inplace = x;
      SwiGlu(inplace.data(), up.data(), inplace.data(), n);
      ASSERT_EQ(inplace, got);
      ref::Gelu(x.data(), want.data(), n);
      Gelu(x.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) gelu.Check(got[i], want[i], 3e-5, 1e-37, "gelu", n, i);
      inplace = x;
      Gelu(inplace.data(), inplace.data(), n);
      ASSERT_EQ(inplace, got);
      ref::GeGlu(x.data(), up.data(), want.data(), n);
      GeGlu(x.data(), up.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) geglu.Check(got[i], want[i], 3e-5, 1e-37, "geglu", n, i);
      inplace = x;
      GeGlu(inplace.data(), up.data(), inplace.data(), n);
      ASSERT_EQ(inplace, got);
      for (float cap : {0.5f, 30.0f, 50.0f}) {
        ref::SoftCap(x.data(), cap, want.data(), n);
        SoftCap(x.data(), cap, got.data(), n);
        for (int64_t i = 0; i < n; ++i)
          softcap.Check(got[i], want[i], 4e-6, 1e-37, "softcap", n, i);
        inplace = x;
        SoftCap(inplace.data(), cap, inplace.data(), n);
        ASSERT_EQ(inplace, got);
      }
    }
  }
  // gpt-oss's clamped SwiGLU: against its double reference, and the clamps by hand.
  for (int64_t n : kSizes) {
    const auto x = Random(n, 20.0f, 15 + n), up = Random(n, 20.0f, 16 + n);
    std::vector<float> want(n), got(n);
    ref::SwiGluOai(x.data(), up.data(), want.data(), n);
    SwiGluOai(x.data(), up.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 4e-6 * (1 + std::fabs(want[i])));
    ApplyGlu(GluKind::kSwiGluOai, x.data(), up.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 4e-6 * (1 + std::fabs(want[i])));
  }
  const float g[3] = {10.0f, 1.0f, -2.0f}, u[3] = {100.0f, -100.0f, 0.5f};
  float o[3];
  SwiGluOai(g, u, o, 3);
  EXPECT_NEAR(o[0], 7.0 / (1 + std::exp(-1.702 * 7.0)) * 8.0, 1e-5);   // gate and up clamped
  EXPECT_NEAR(o[1], 1.0 / (1 + std::exp(-1.702)) * -6.0, 1e-5);        // up clamped at -7
  EXPECT_NEAR(o[2], -2.0 / (1 + std::exp(1.702 * 2.0)) * 1.5, 1e-6);
  // Subnormal inputs: silu(x) ≈ x/2.
  std::vector<float> tiny = {1e-40f, -1e-40f, 0.0f, -0.0f};
  std::vector<float> out(4);
  Silu(tiny.data(), out.data(), 4);
  EXPECT_NEAR(out[0], 5e-41, 1e-44);
  EXPECT_NEAR(out[1], -5e-41, 1e-44);
  EXPECT_EQ(out[2], 0.0f);
}

// ------------------------------------------------------------------ elementwise / reductions

TEST_P(OpsTest, ElementwiseAreExact) {
  for (int64_t n : kSizes) {
    const auto a = Random(n, 10.0f, 7 + n);
    const auto b = Random(n, 10.0f, 8 + n);
    std::vector<float> want(n), got(n);
    ref::Add(a.data(), b.data(), want.data(), n);
    Add(a.data(), b.data(), got.data(), n);
    ASSERT_EQ(got, want);
    ref::Mul(a.data(), b.data(), want.data(), n);
    Mul(a.data(), b.data(), got.data(), n);
    ASSERT_EQ(got, want);
    ref::Scale(a.data(), -0.3f, want.data(), n);
    Scale(a.data(), -0.3f, got.data(), n);
    ASSERT_EQ(got, want);
    want = b;
    got = b;
    ref::Axpy(1.7f, a.data(), want.data(), n);
    Axpy(1.7f, a.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {  // fused where the target has FMA, else mul then add
      const float unfused = 1.7f * a[i] + b[i];
      ASSERT_TRUE(got[i] == want[i] || got[i] == unfused) << n << " " << i;
    }
    got = a;  // in place: a += b
    Add(got.data(), b.data(), got.data(), n);
    ref::Add(a.data(), b.data(), want.data(), n);
    ASSERT_EQ(got, want);
  }
}

TEST_P(OpsTest, ReductionsMatchReference) {
  ErrorStats dot{"DotF32"}, sum{"SumF32"}, stream{"StreamSumF32"};
  for (float mag : {1e-39f, 1e-3f, 1.0f, 1e4f}) {
    for (int64_t n : kSizes) {
      const auto a = Random(n, mag, 9 + n);
      const auto b = Random(n, 1.0f, 10 + n);
      double abs_dot = 0.0, abs_sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        abs_dot += std::fabs(static_cast<double>(a[i]) * b[i]);
        abs_sum += std::fabs(a[i]);
      }
      dot.Check(DotF32(a.data(), b.data(), n), ref::Dot(a.data(), b.data(), n), 0.0, 1e-6 * abs_dot,
                "dot", n, 0);
      sum.Check(SumF32(a.data(), n), ref::Sum(a.data(), n), 0.0, 1e-6 * abs_sum, "sum", n, 0);
      stream.Check(StreamSumF32(a.data(), n), ref::Sum(a.data(), n), 0.0, 1e-6 * abs_sum,
                   "stream sum", n, 0);
      ASSERT_EQ(MaxF32(a.data(), n), ref::Max(a.data(), n));
      ASSERT_EQ(ArgMax(a.data(), n), ref::ArgMax(a.data(), n));
    }
  }
  EXPECT_EQ(DotF32(nullptr, nullptr, 0), 0.0f);
  EXPECT_EQ(SumF32(nullptr, 0), 0.0f);
  EXPECT_EQ(StreamSumF32(nullptr, 0), 0.0f);
}

TEST_P(OpsTest, ArgMaxTiesAndInfinities) {
  for (int64_t n : kSizes) {
    std::vector<float> x(n, -kInf);
    EXPECT_EQ(ArgMax(x.data(), n), 0);
    EXPECT_EQ(MaxF32(x.data(), n), -kInf);
    for (int64_t at : {n - 1, n / 2, int64_t{0}}) {  // ties: the first index wins
      x[at] = 2.0f;
      EXPECT_EQ(ArgMax(x.data(), n), at) << n;
    }
    x[n - 1] = kInf;
    EXPECT_EQ(ArgMax(x.data(), n), n - 1);
  }
}

// ------------------------------------------------------------------ conversion

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST_P(OpsTest, HalfToFloatExhaustive) {
  std::vector<uint16_t> all(65536 + 5);  // odd length exercises the tail
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  const int64_t n = static_cast<int64_t>(all.size());
  std::vector<float> want(n), got(n);
  ref::ConvertF16ToF32(all.data(), want.data(), n);
  ConvertF16ToF32(all.data(), got.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(Bits(got[i]), Bits(want[i])) << "f16 " << i;
  ref::ConvertBF16ToF32(all.data(), want.data(), n);
  ConvertBF16ToF32(all.data(), got.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(Bits(got[i]), Bits(want[i])) << "bf16 " << i;
}

// Every half/bf16 value, the f32 midpoints to its neighbours (rounding ties) and the f32 values
// one ulp either side of each of those, plus random bit patterns (NaN payloads, subnormals).
std::vector<float> NarrowingInputs(bool bf16) {
  std::vector<float> in;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t base = bf16 ? (h << 16) : Bits(F16ToF32(static_cast<uint16_t>(h)));
    for (uint32_t mid : {base, base + (bf16 ? 0x8000u : 0u)}) {
      for (int d = -1; d <= 1; ++d) in.push_back(std::bit_cast<float>(mid + d));
    }
  }
  if (!bf16) {  // midpoints between halves, in f32: exact averages of neighbours
    for (uint32_t h = 0; h < 0x7c00; ++h) {
      const double mid = (static_cast<double>(F16ToF32(static_cast<uint16_t>(h))) +
                          F16ToF32(static_cast<uint16_t>(h + 1))) /
                         2;
      const float m = static_cast<float>(mid);
      for (int d = -1; d <= 1; ++d) {
        in.push_back(std::bit_cast<float>(Bits(m) + d));
        in.push_back(-std::bit_cast<float>(Bits(m) + d));
      }
    }
  }
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) in.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  in.push_back(kInf);
  in.push_back(-kInf);
  return in;
}

TEST_P(OpsTest, FloatToHalfBitExact) {
  for (bool bf16 : {false, true}) {
    const auto in = NarrowingInputs(bf16);
    const int64_t n = static_cast<int64_t>(in.size());
    std::vector<uint16_t> want(n), got(n);
    if (bf16) {
      ref::ConvertF32ToBF16(in.data(), want.data(), n);
      ConvertF32ToBF16(in.data(), got.data(), n);
    } else {
      ref::ConvertF32ToF16(in.data(), want.data(), n);
      ConvertF32ToF16(in.data(), got.data(), n);
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], want[i]) << (bf16 ? "bf16" : "f16") << " input bits 0x" << std::hex
                                 << Bits(in[i]);
    }
    for (int64_t len : kSizes) {  // tails: nothing written past n
      std::vector<uint16_t> out(len + 1, 0xabcd);
      if (bf16) {
        ConvertF32ToBF16(in.data(), out.data(), len);
      } else {
        ConvertF32ToF16(in.data(), out.data(), len);
      }
      ASSERT_EQ(out[len], 0xabcd);
      ASSERT_TRUE(std::equal(out.begin(), out.begin() + len, want.begin()));
    }
  }
}

// ------------------------------------------------------------------ RoPE

using RopeFn = void (*)(float*, int64_t, int64_t, int64_t, int64_t, float, float, const float*,
                        float);

TEST_P(OpsTest, RopeCacheMatchesUncached) {
  ErrorStats st{"RopeCache"};
  const float factors[64] = {1.0f, 1.0f, 2.5f, 8.0f, 1.0f, 3.0f, 1.5f, 40.0f, 1.0f, 2.0f, 1.0f,
                             1.0f, 4.0f, 7.0f, 1.0f, 1.0f, 2.0f, 1.0f, 1.0f,  6.0f, 1.0f, 1.0f,
                             1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,  1.0f, 1.0f, 1.0f,
                             1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,  1.0f, 1.0f, 1.0f,
                             1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,  1.0f, 1.0f, 1.0f,
                             1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f,  1.0f};
  const int64_t n_heads = 3;
  for (RopeType type : {RopeType::kNorm, RopeType::kNeox}) {
    const RopeFn fn = type == RopeType::kNorm ? RopeNorm : RopeNeox;
    for (int64_t n_rot : {2, 4, 6, 10, 16, 34, 64, 128}) {
      for (int64_t extra : {0, 6}) {  // partial rotary: head_dim > n_rot
        const int64_t head_dim = n_rot + extra;
        for (const float* ff : {static_cast<const float*>(nullptr), factors}) {
         for (float mscale : {1.0f, 1.19f}) {  // LongRoPE's attention factor scales cos/sin
          const int64_t max_pos = 4100;
          const RopeCache cache(type, n_rot, max_pos, 10000.0f, 0.5f, ff, mscale);
          for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{17}, max_pos - 1}) {
            const auto x = Random(n_heads * head_dim, 2.0f, 12 + pos);
            auto want = x, got = x;
            fn(want.data(), n_heads, head_dim, n_rot, pos, 10000.0f, 0.5f, ff, mscale);
            cache.Apply(got.data(), n_heads, head_dim, pos);
            for (int64_t i = 0; i < n_heads * head_dim; ++i) {
              st.Check(got[i], want[i], 0.0, 2e-6, "rope", n_rot, i);
              if (i % head_dim >= n_rot) {
                ASSERT_EQ(got[i], x[i]);  // past n_rot: untouched (mscale too)
              }
            }
          }
         }
        }
      }
    }
  }
}

TEST_P(OpsTest, RopeLongContextPositions) {
  // 128k positions with a small n_rot (cache = 8 MiB): the cache, built in double, agrees with
  // the uncached path at the far end, where a float pos·theta would be ~0.01 rad off.
  const int64_t max_pos = 131072, n_rot = 8;
  for (RopeType type : {RopeType::kNorm, RopeType::kNeox}) {
    const RopeFn fn = type == RopeType::kNorm ? RopeNorm : RopeNeox;
    const RopeCache cache(type, n_rot, max_pos, 500000.0f, 1.0f, nullptr);
    for (int64_t pos : {max_pos - 1, int64_t{100003}}) {
      const auto x = Random(2 * n_rot, 1.0f, 13);
      auto want = x, got = x;
      fn(want.data(), 2, n_rot, n_rot, pos, 500000.0f, 1.0f, nullptr, 1.0f);
      cache.Apply(got.data(), 2, n_rot, pos);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6);
    }
    // Pair 0 rotates by exactly pos radians: (1, 0) -> (cos pos, sin pos).
    std::vector<float> v(n_rot, 0.0f);
    v[0] = 1.0f;
    fn(v.data(), 1, n_rot, n_rot, max_pos - 1, 500000.0f, 1.0f, nullptr, 1.0f);
    const int64_t second = type == RopeType::kNorm ? 1 : n_rot / 2;
    EXPECT_NEAR(v[0], std::cos(static_cast<double>(max_pos - 1)), 1e-7);
    EXPECT_NEAR(v[second], std::sin(static_cast<double>(max_pos - 1)), 1e-7);
  }
}

TEST_P(OpsTest, RopeKnownValues) {
  for (RopeFn fn : {RopeNorm, RopeNeox}) {
    // Position 0 is the identity (cos 1, sin 0: exact).
    const auto x = Random(4 * 32, 5.0f, 14);
    auto y = x;
    fn(y.data(), 4, 32, 24, 0, 10000.0f, 1.0f, nullptr, 1.0f);
    ASSERT_EQ(y, x);
    // Rotating by a then by b equals rotating by a + b.
    for (auto [a, b] : {std::pair<int64_t, int64_t>{3, 5}, {1000, 2345}, {70000, 60000}}) {
      auto two = x, one = x;
      fn(two.data(), 4, 32, 24, a, 10000.0f, 0.25f, nullptr, 1.0f);
      fn(two.data(), 4, 32, 24, b, 10000.0f, 0.25f, nullptr, 1.0f);
      fn(one.data(), 4, 32, 24, a + b, 10000.0f, 0.25f, nullptr, 1.0f);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(two[i], one[i], 5e-6) << a << "+" << b;
    }
    // Frequency factor f at pair 0 equals freq_scale 1/f for that pair.
    float ff[1] = {4.0f};
    std::vector<float> p = {1.0f, 0.0f}, q = {1.0f, 0.0f};
    fn(p.data(), 1, 2, 2, 9, 10000.0f, 1.0f, ff, 1.0f);
    fn(q.data(), 1, 2, 2, 9, 10000.0f, 0.25f, nullptr, 1.0f);
    EXPECT_EQ(p, q);
    EXPECT_NEAR(p[0], std::cos(2.25), 1e-7);
    EXPECT_NEAR(p[1], std::sin(2.25), 1e-7);
  }
}

// YaRN (ggml's rope_yarn): pairs below the low corner take the extrapolated angle (θ, the
// unscaled one), pairs above the high corner the interpolated one (freq_scale · θ), the ramp
// between them blends; every cos/sin carries 1 + 0.1 ln(1 / freq_scale).
TEST_P(OpsTest, RopeYarnBlendsByPair) {
  const int64_t n_rot = 64, n_ctx_orig = 4096;
  const float base = 150000.0f, scale = 1.0f / 32;
  const RopeYarn y = MakeRopeYarn(n_rot, n_ctx_orig, base, 32.0f, 1.0f);
  // corr_dim(b) = 64 ln(4096 / (2π b)) / (2 ln 150000): 8.09 for 32, 17.40 for 1.
  EXPECT_EQ(y.corr_low, 8.0f);
  EXPECT_EQ(y.corr_high, 18.0f);
  const int64_t pos = 1234;
  const RopeCache cache(RopeType::kNeox, n_rot, pos + 1, base, scale, nullptr, 1.0f, y);
  const double ms = 1 + 0.1 * std::log(32.0);
  for (int64_t i : {0, 5, 8, 13, 18, 31}) {
    std::vector<float> x(n_rot, 0.0f);
    x[i] = 1.0f;  // neox pair i: (x[i], x[i + 32])
    cache.Apply(x.data(), 1, n_rot, pos);
    const double theta = pos * std::pow(double{base}, -2.0 * i / n_rot);
    const double ramp = 1 - std::clamp((i - 8.0) / 10.0, 0.0, 1.0);
    const double want = theta * scale * (1 - ramp) + theta * ramp;
    EXPECT_NEAR(x[i], ms * std::cos(want), 2e-6) << "pair " << i;
    EXPECT_NEAR(x[i + 32], ms * std::sin(want), 2e-6) << "pair " << i;
  }
  // ext_factor 0: plain linear scaling.
  const RopeCache plain(RopeType::kNeox, n_rot, pos + 1, base, scale, nullptr, 1.0f);
  std::vector<float> a(n_rot, 1.0f), b(n_rot, 1.0f);
  plain.Apply(a.data(), 1, n_rot, pos);
  RopeNeox(b.data(), 1, n_rot, n_rot, pos, base, scale, nullptr, 1.0f);
  for (int64_t i = 0; i < n_rot; ++i) EXPECT_NEAR(a[i], b[i], 2e-6);
}

TEST_P(OpsTest, RopeNormIsNeoxUnderPermutation) {
  // NEOX rotates (x[i], x[i+h]); NORM rotates (x[2i], x[2i+1]). Moving even dims to the first
  // half and odd dims to the second turns one into the other, exactly.
  const int64_t n_heads = 2, head_dim = 20, n_rot = 16, h = n_rot / 2;
  const auto x = Random(n_heads * head_dim, 3.0f, 15);
  auto perm = [&](const std::vector<float>& v) {
    std::vector<float> r = v;
    for (int64_t k = 0; k < n_heads; ++k) {
      for (int64_t i = 0; i < h; ++i) {
        r[k * head_dim + i] = v[k * head_dim + 2 * i];
        r[k * head_dim + i + h] = v[k * head_dim + 2 * i + 1];
      }
    }
    return r;
  };
  const float ff[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto norm = x;
  RopeNorm(norm.data(), n_heads, head_dim, n_rot, 777, 10000.0f, 1.0f, ff);
  auto neox = perm(x);
  RopeNeox(neox.data(), n_heads, head_dim, n_rot, 777, 10000.0f, 1.0f, ff);
  EXPECT_EQ(neox, perm(norm));
}

}  // namespace
}  // namespace tarmac::kernels
