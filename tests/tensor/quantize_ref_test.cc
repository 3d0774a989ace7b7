#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

namespace tarmac {
namespace {

std::vector<uint8_t> Quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(RowBytes(t, static_cast<int64_t>(x.size())));
  Status st = QuantizeRowRef(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return q;
}

std::vector<float> Dequantize(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(n);
  DequantizeRowRef(t, q.data(), y.data(), n);
  return y;
}

std::vector<float> RoundTrip(DType t, const std::vector<float>& x) {
  return Dequantize(t, Quantize(t, x), static_cast<int64_t>(x.size()));
}

// RMS of the error over RMS of the data.
double RelRmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    s += double(x[i]) * x[i];
  }
  return s > 0 ? std::sqrt(e / s) : std::sqrt(e);
}

enum class Dist { kNormal, kUniform, kLaplace, kNormalOutliers, kShiftedNormal };

std::vector<float> Random(Dist dist, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::exponential_distribution<float> expo(10.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (dist) {
      case Dist::kNormal: x[i] = normal(rng); break;
      case Dist::kUniform: x[i] = uni(rng); break;
      case Dist::kLaplace: x[i] = (rng() & 1 ? 1 : -1) * expo(rng); break;
      case Dist::kNormalOutliers: x[i] = normal(rng) * (i % 97 == 5 ? 20.0f : 1.0f); break;
      case Dist::kShiftedNormal: x[i] = 0.05f + normal(rng); break;
    }
  }
  return x;
}

const char* DistName(Dist d) {
  switch (d) {
    case Dist::kNormal: return "normal";
    case Dist::kUniform: return "uniform";
    case Dist::kLaplace: return "laplace";
    case Dist::kNormalOutliers: return "normal+outliers";
    case Dist::kShiftedNormal: return "shifted-normal";
  }
  return "?";
}

struct Bound {
  DType type;
  double smooth;  // normal, uniform, shifted normal
  double heavy;   // laplace, normal with 1% outliers at 20 sigma
};

// Relative RMSE bounds, about 1.3x the worst measured value (printed by the test) so that a
// regression in the search shows up, while seeds and sizes do not matter. Measured on normal
// data: q8_0 0.54%, q4_0 8.6%, q4_K 7.1%, q6_K 1.7% (the others print theirs) — 4 bits over 32 values cannot do much
// better than a step of range/15 (a uniform error of ~0.08 sigma), Q4_K's edge is its fitted
// offset and scale, Q6_K's its 64 levels over 16 values.
constexpr Bound kBounds[] = {
    {DType::kF32, 0.0, 0.0},        {DType::kF16, 0.0004, 0.0004},
    {DType::kBF16, 0.003, 0.003},   {DType::kQ8_0, 0.0075, 0.015},
    {DType::kQ4_0, 0.115, 0.20},    {DType::kQ4_K, 0.095, 0.135},
    {DType::kQ6_K, 0.023, 0.042},   {DType::kQ8_K, 0.0095, 0.037},
    {DType::kQ4_1, 0.105, 0.145},   {DType::kQ5_0, 0.057, 0.12},
    {DType::kQ5_1, 0.053, 0.07},    {DType::kQ2_K, 0.36, 0.41},
    {DType::kQ3_K, 0.19, 0.275},    {DType::kQ5_K, 0.047, 0.067},
    {DType::kIQ4_NL, 0.097, 0.16},  {DType::kIQ4_XS, 0.098, 0.165},
    {DType::kMXFP4, 0.148, 0.22},
};

bool IsHeavy(Dist d) { return d == Dist::kLaplace || d == Dist::kNormalOutliers; }

TEST(QuantizeRefTest, RoundTripErrorWithinBounds) {
  const Dist dists[] = {Dist::kNormal, Dist::kUniform, Dist::kLaplace, Dist::kNormalOutliers,
                        Dist::kShiftedNormal};
  const int64_t sizes[] = {256, 4096, 256 * 33};
  for (const Bound& b : kBounds) {
    double worst[2] = {0, 0};
    for (Dist d : dists) {
      for (int64_t n : sizes) {
        auto x = Random(d, n, static_cast<uint32_t>(n * 7 + static_cast<int>(d)));
        const double e = RelRmse(x, RoundTrip(b.type, x));
        worst[IsHeavy(d)] = std::max(worst[IsHeavy(d)], e);
        EXPECT_LE(e, IsHeavy(d) ? b.heavy : b.smooth)
            << DTypeName(b.type) << " " << DistName(d) << " n=" << n;
      }
    }
    std::printf("%-5s worst relative RMSE: smooth %.3f%% (bound %.2f%%), heavy %.3f%% (%.2f%%)\n",
                std::string(DTypeName(b.type)).c_str(), 100 * worst[0], 100 * b.smooth,
                100 * worst[1], 100 * b.heavy);
  }
}

TEST(QuantizeRefTest, KQuantsBeatQ4_0OnSameData) {
  for (Dist d : {Dist::kNormal, Dist::kLaplace, Dist::kShiftedNormal}) {
    auto x = Random(d, 256 * 64, 1234);
    const double e40 = RelRmse(x, RoundTrip(DType::kQ4_0, x));
    const double e4k = RelRmse(x, RoundTrip(DType::kQ4_K, x));
    const double e6k = RelRmse(x, RoundTrip(DType::kQ6_K, x));
    EXPECT_LT(e4k, 0.88 * e40) << DistName(d);
    EXPECT_LT(e6k, 0.3 * e40) << DistName(d);
  }
}

// The K-quant searches run on normalised blocks, so the error is relative to the data: the same
// at any magnitude until the f16 super-block scales become subnormal (weights around 1e-3).
TEST(QuantizeRefTest, KQuantErrorDoesNotDependOnMagnitude) {
  auto base = Random(Dist::kNormal, 256 * 16, 77);
  for (DType t : {DType::kQ4_K, DType::kQ6_K}) {
    const double ref = RelRmse(base, RoundTrip(t, base));
    for (float scale : {0.5f, 20.0f, 1000.0f}) {
      std::vector<float> x(base);
      for (float& v : x) v *= scale;
      EXPECT_NEAR(RelRmse(x, RoundTrip(t, x)), ref, 0.05 * ref) << DTypeName(t) << " x" << scale;
    }
  }
}

TEST(QuantizeRefTest, AllZerosAreExact) {
  std::vector<float> x(512, 0.0f);
  for (const Bound& b : kBounds) {
    auto y = RoundTrip(b.type, x);
    for (float v : y) ASSERT_EQ(v, 0.0f) << DTypeName(b.type);
  }
}

// Relative error of a constant row. K-quant and IQ4_XS scales are 4/6/8-bit multiples of an
// f16 d: up to ~1/256; MXFP4's power-of-two scale leaves gaps of up to 1/5 between its levels.
double ConstantTolerance(DType t) {
  switch (t) {
    case DType::kQ4_K: case DType::kQ6_K: case DType::kQ5_K: case DType::kQ3_K:
      return 5e-3;
    case DType::kIQ4_XS: return 1e-2;  // the constant lands on one non-uniform level
    case DType::kQ2_K: return 2e-2;    // 4-bit scales
    case DType::kMXFP4: return 0.2;
    default: return 1e-3;
  }
}

// Error of a zero beside a spike, relative to the spike. Q4_K's zero is d*sc*q - dmin*m with sc
// and m quantized against different super-block scales; Q4_1/Q5_1 reach zero from an f16 min
// in f16 steps; IQ4's levels have no zero (the nearest is 1/113 of the outermost).
double ZeroTolerance(DType t) {
  switch (t) {
    case DType::kQ4_K: case DType::kQ2_K: case DType::kQ3_K: case DType::kQ5_K:
    case DType::kQ4_1: case DType::kQ5_1:
      return 1e-3;
    case DType::kIQ4_NL: case DType::kIQ4_XS: return 1e-2;
    default: return 0.0;
  }
}

TEST(QuantizeRefTest, ConstantRows) {
  for (float c : {1.0f, -0.5f, 0.013f}) {
    std::vector<float> x(512, c);
    for (const Bound& b : kBounds) {
      auto y = RoundTrip(b.type, x);
      const double tol = ConstantTolerance(b.type);
      for (float v : y) ASSERT_NEAR(v, c, std::fabs(c) * tol) << DTypeName(b.type) << " c=" << c;
    }
  }
}

TEST(QuantizeRefTest, SingleSpikeIsKeptAndRestStaysZero) {
  std::vector<float> x(512, 0.0f);
  x[77] = 3.0f;
  x[300] = -2.0f;
  for (const Bound& b : kBounds) {
    auto y = RoundTrip(b.type, x);
    EXPECT_NEAR(y[77], 3.0f, 3.0f * 2e-3) << DTypeName(b.type);
    EXPECT_NEAR(y[300], -2.0f, 2.0f * 2e-3) << DTypeName(b.type);
    const float tol = 3.0f * ZeroTolerance(b.type);
    for (size_t i = 0; i < x.size(); ++i) {
      if (i != 77 && i != 300) {
        ASSERT_NEAR(y[i], 0.0f, tol) << DTypeName(b.type) << " at " << i;
      }
    }
  }
}

// Decoded values are exactly representable, so re-quantizing them must be lossless: for the
// absmax formats bit for bit, for the searched K-quants value for value (a search may land on
// a different but equivalent encoding, and the 6-bit scale lattice may shift by rounding).
TEST(QuantizeRefTest, RequantizeIsStable) {
  for (Dist d : {Dist::kNormal, Dist::kLaplace, Dist::kShiftedNormal}) {
    auto x = Random(d, 256 * 16, 99);
    for (DType t : {DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
      auto q1 = Quantize(t, x);
      auto y1 = Dequantize(t, q1, x.size());
      auto q2 = Quantize(t, y1);
      EXPECT_EQ(q1, q2) << DTypeName(t) << " " << DistName(d);
    }
    {  // Q8_K keeps a float d = 1/iscale, which may move by an ulp; the codes may not move.
      auto q1 = Quantize(DType::kQ8_K, x);
      auto q2 = Quantize(DType::kQ8_K, Dequantize(DType::kQ8_K, q1, x.size()));
      for (size_t blk = 0; blk < x.size() / kQK_K; ++blk) {
        BlockQ8_K a, b;
        std::memcpy(&a, q1.data() + blk * sizeof a, sizeof a);
        std::memcpy(&b, q2.data() + blk * sizeof b, sizeof b);
        EXPECT_EQ(0, std::memcmp(a.qs, b.qs, sizeof a.qs)) << blk;
        EXPECT_EQ(0, std::memcmp(a.bsums, b.bsums, sizeof a.bsums)) << blk;
        EXPECT_NEAR(a.d, b.d, std::fabs(a.d) * 1e-6) << blk;
      }
    }
    for (DType t : {DType::kQ4_K, DType::kQ6_K}) {
      auto y1 = RoundTrip(t, x);
      auto y2 = RoundTrip(t, y1);
      const double e = RelRmse(y1, y2);
      EXPECT_LT(e, t == DType::kQ4_K ? 0.01 : 0.002) << DTypeName(t) << " " << DistName(d);
      // and requantizing never drifts further than the first pass lost
      EXPECT_LT(e, RelRmse(x, y1)) << DTypeName(t);
    }
  }
}

TEST(QuantizeRefTest, Q4KScalePackingIsInverseOfUnpack) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 1000; ++trial) {
    uint8_t sc[8], m[8], packed[12];
    for (int j = 0; j < 8; ++j) sc[j] = rng() % 64, m[j] = rng() % 64;
    if (trial == 0) {
      std::memset(sc, 63, 8);
      std::memset(m, 63, 8);
    }
    PackQ4KScaleMin(sc, m, packed);
    for (int j = 0; j < 8; ++j) {
      uint8_t s2, m2;
      Q4KScaleMin(j, packed, &s2, &m2);
      ASSERT_EQ(s2, sc[j]) << j;
      ASSERT_EQ(m2, m[j]) << j;
    }
  }
}

// Hand-checked layout facts: where element i's code lives.
TEST(QuantizeRefTest, Q4_0AndQ8_0LayoutFacts) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;   // largest magnitude -> code 0, d = 1
  x[1] = 1.0f;    // code 9
  x[16] = 7.0f;   // high nibble of byte 0: code 15
  auto q = Quantize(DType::kQ4_0, x);
  BlockQ4_0 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(F16ToF32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 0x0 | (15 << 4));
  EXPECT_EQ(b.qs[1], 9 | (8 << 4));

  x.assign(32, 0.0f);
  x[3] = -127.0f;
  x[4] = 64.0f;
  q = Quantize(DType::kQ8_0, x);
  BlockQ8_0 c;
  std::memcpy(&c, q.data(), sizeof c);
  EXPECT_EQ(F16ToF32(c.d), 1.0f);
  EXPECT_EQ(c.qs[3], -127);
  EXPECT_EQ(c.qs[4], 64);
}

TEST(QuantizeRefTest, Q6KLayoutPutsEachElementWhereTheDecoderLooks) {
  // Distinct integer values on a common grid decode exactly when every element's code lands in
  // the right nibble/bit pair; any mix-up of ql/qh positions would scramble them.
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>((i * 37) % 63 - 32);
  for (int j = 0; j < 16; ++j) x[16 * j] = -32.0f;  // every sub-block has the same scale
  auto y = RoundTrip(DType::kQ6_K, x);
  for (int i = 0; i < 256; ++i) ASSERT_NEAR(y[i], x[i], 1e-3) << i;
}

TEST(QuantizeRefTest, Q4KLayoutPutsEachElementWhereTheDecoderLooks) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>((i * 7) % 16);
  for (int j = 0; j < 8; ++j) x[32 * j] = 0.0f, x[32 * j + 1] = 15.0f;
  auto y = RoundTrip(DType::kQ4_K, x);
  for (int i = 0; i < 256; ++i) ASSERT_NEAR(y[i], x[i], 0.02) << i;
}

TEST(QuantizeRefTest, Q8KBsumsAndSign) {
  auto x = Random(Dist::kNormal, 512, 3);
  x[10] = -1.0f;   // largest magnitude of block 0, negative
  x[300] = 2.0f;   // largest magnitude of block 1, positive
  auto q = Quantize(DType::kQ8_K, x);
  BlockQ8_K b[2];
  std::memcpy(b, q.data(), sizeof b);
  // Scaled by -127/max: the largest magnitude always becomes -127, d takes the opposite sign.
  EXPECT_EQ(b[0].qs[10], -127);
  EXPECT_FLOAT_EQ(b[0].d, 1.0f / 127.0f);
  EXPECT_EQ(b[1].qs[300 - 256], -127);
  EXPECT_FLOAT_EQ(b[1].d, -2.0f / 127.0f);
  for (int blk = 0; blk < 2; ++blk) {
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b[blk].qs[16 * g + j];
      EXPECT_EQ(b[blk].bsums[g], sum) << g;
    }
  }
}

TEST(QuantizeRefTest, Q8KBsumsOfEveryGroup) {
  auto x = Random(Dist::kUniform, 256, 4);
  auto q = Quantize(DType::kQ8_K, x);
  BlockQ8_K b;
  std::memcpy(&b, q.data(), sizeof b);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
    EXPECT_EQ(b.bsums[g], sum) << g;
  }
}

TEST(QuantizeRefTest, NonFiniteInputIsAnErrorNamingTheIndex) {
  for (const Bound& b : kBounds) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(256, 0.5f);
      x[123] = bad;
      std::vector<uint8_t> q(RowBytes(b.type, 256));
      Status st = QuantizeRowRef(b.type, x.data(), q.data(), 256);
      ASSERT_FALSE(st.ok()) << DTypeName(b.type);
      EXPECT_NE(st.message().find("element 123"), std::string::npos) << st.message();
    }
  }
}

TEST(QuantizeRefTest, OutOfRangeValuesAreErrors) {
  std::vector<float> x(256, 0.0f);
  x[7] = 1e30f;
  std::vector<uint8_t> q(RowBytes(DType::kF32, 256));
  for (DType t : {DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    Status st = QuantizeRowRef(t, x.data(), q.data(), 256);
    EXPECT_FALSE(st.ok()) << DTypeName(t);
    EXPECT_NE(st.message().find(t == DType::kF16 ? "element 7" : "block 0"), std::string::npos)
        << st.message();
  }
  EXPECT_TRUE(QuantizeRowRef(DType::kBF16, x.data(), q.data(), 256).ok());
  EXPECT_TRUE(QuantizeRowRef(DType::kQ8_K, x.data(), q.data(), 256).ok());
}

TEST(QuantizeRefTest, BadRowLengthAndUnsupportedTypeAreErrors) {
  std::vector<float> x(100, 0.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_EQ(QuantizeRowRef(DType::kQ8_0, x.data(), q.data(), 100).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeRowRef(DType::kQ4_K, x.data(), q.data(), 96).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeRowRef(DType::kQ8_1, x.data(), q.data(), 256).code(),
            StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tarmac
