// Block layouts of the legacy, K, IQ4, MXFP4 and ternary types: hand-built blocks decode to
// the values the format defines (facts read off the layout, independent of our encoders), and
// values on a type's own grid survive quantize -> dequantize exactly (every element's code lands
// where the decoder looks for it).
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

namespace tarmac {
namespace {

template <typename Block>
std::vector<float> Decode(DType t, const Block& b) {
  const int64_t n = Traits(t).block_size;
  std::vector<float> y(n);
  DequantizeRowRef(t, &b, y.data(), n);
  return y;
}

std::vector<float> RoundTrip(DType t, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(RowBytes(t, n));
  const Status st = QuantizeRowRef(t, x.data(), q.data(), n);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<float> y(n);
  DequantizeRowRef(t, q.data(), y.data(), n);
  return y;
}

constexpr uint16_t kOne = 0x3C00;  // 1.0 in f16

TEST(QuantLayoutTest, Q2KPlanesAndScales) {
  BlockQ2_K b{};
  b.d = kOne;
  b.dmin = 0x3800;  // 0.5
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>(1 | (s == 2 ? 2 << 4 : 0));
  b.qs[0] = 0b11100100;   // elements 0, 32, 64, 96 (planes 0..3) = 0, 1, 2, 3
  b.qs[32] = 0b00000011;  // element 128
  const auto y = Decode(DType::kQ2_K, b);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[32], 1.0f - 1.0f);  // sub-block 2: min 2 * 0.5
  EXPECT_EQ(y[64], 2.0f);
  EXPECT_EQ(y[96], 3.0f);
  EXPECT_EQ(y[128], 3.0f);
}

TEST(QuantLayoutTest, Q3KHighBitsAndScales) {
  BlockQ3_K b{};
  b.d = kOne;
  uint8_t sc[16];
  for (int s = 0; s < 16; ++s) sc[s] = static_cast<uint8_t>(32 + (s == 15 ? 3 : 1));
  PackQ3KScales(sc, b.scales);
  std::memset(b.hmask, 0xFF, sizeof b.hmask);
  b.hmask[0] = 0xFE;  // element 0 (bit 0 of hmask[0]) loses its high bit: -4
  b.qs[0] = 0b11100100;
  b.qs[63] = 0b11000000;  // element 255: plane 3 of half 1, l = 31
  const auto y = Decode(DType::kQ3_K, b);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[32], 1.0f);
  EXPECT_EQ(y[64], 2.0f);
  EXPECT_EQ(y[96], 3.0f);
  EXPECT_EQ(y[255], 9.0f);  // sub-block 15: scale 3
  EXPECT_EQ(y[1], 0.0f);
}

TEST(QuantLayoutTest, Q3KScalePackingIsInverseOfUnpack) {
  for (int v = 0; v < 64; ++v) {
    uint8_t in[16], packed[12], out[16];
    for (int s = 0; s < 16; ++s) in[s] = static_cast<uint8_t>((v + 5 * s) % 64);
    PackQ3KScales(in, packed);
    Q3KScales(packed, out);
    for (int s = 0; s < 16; ++s) ASSERT_EQ(out[s], in[s]) << v << " " << s;
  }
}

TEST(QuantLayoutTest, Q5KFifthBit) {
  BlockQ5_K b{};
  b.d = kOne;
  uint8_t sc[8] = {1, 1, 1, 1, 1, 1, 1, 1}, m[8] = {};
  PackQ4KScaleMin(sc, m, b.scales);
  b.qh[0] = 0b00000111;  // bit 4 of elements 0, 32, 64
  b.qs[0] = 0x21;        // element 0: 1, element 32: 2
  const auto y = Decode(DType::kQ5_K, b);
  EXPECT_EQ(y[0], 17.0f);
  EXPECT_EQ(y[32], 18.0f);
  EXPECT_EQ(y[64], 16.0f);
  EXPECT_EQ(y[96], 0.0f);
}

TEST(QuantLayoutTest, Q5_0AndQ4_1) {
  BlockQ5_0 a{};
  a.d = kOne;
  a.qs[0] = 0xF3;
  const uint32_t qh = (1u << 0) | (1u << 16);
  std::memcpy(a.qh, &qh, 4);
  auto y = Decode(DType::kQ5_0, a);
  EXPECT_EQ(y[0], 3.0f);       // 16 + 3 - 16
  EXPECT_EQ(y[16], 15.0f);     // 16 + 15 - 16
  EXPECT_EQ(y[1], -16.0f);
  BlockQ4_1 b{};
  b.d = 0x4000;  // 2
  b.m = 0xBC00;  // -1
  b.qs[5] = 0x31;
  y = Decode(DType::kQ4_1, b);
  EXPECT_EQ(y[5], 1.0f);
  EXPECT_EQ(y[21], 5.0f);
  EXPECT_EQ(y[0], -1.0f);
}

TEST(QuantLayoutTest, Iq4XsScalesAndLevels) {
  BlockIQ4_XS b{};
  b.d = kOne;
  // Sub-block 3: ls = 0x25 = 37 -> scale 5 (low nibble in the high half of scales_l[1]).
  b.scales_l[1] = 0x50;
  b.scales_h = static_cast<uint16_t>(2 << 6);
  for (int s = 0; s < 8; ++s) {
    if (s != 3) {
      b.scales_l[s / 2] |= static_cast<uint8_t>(0 << (4 * (s % 2)));
      b.scales_h |= static_cast<uint16_t>(2 << (2 * s));  // ls = 32: scale 0
    }
  }
  b.qs[48] = 0xF0;  // sub-block 3, element 96: level 0 (-127), element 112: level 15 (113)
  const auto y = Decode(DType::kIQ4_XS, b);
  EXPECT_EQ(y[96], -635.0f);
  EXPECT_EQ(y[112], 565.0f);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(QuantLayoutTest, Mxfp4Exponent) {
  BlockMXFP4 b{};
  b.e = 127;  // 2^0 as E8M0; the doubled levels halve it
  b.qs[0] = 0x7F;
  const auto y = Decode(DType::kMXFP4, b);
  EXPECT_EQ(y[0], -6.0f);
  EXPECT_EQ(y[16], 6.0f);
  EXPECT_EQ(E8M0HalfToF32(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(E8M0HalfToF32(1), std::ldexp(1.0f, -127));
  EXPECT_EQ(E8M0HalfToF32(200), std::ldexp(1.0f, 72));
}

TEST(QuantLayoutTest, TernaryPacking) {
  BlockTQ1_0 a{};
  a.d = kOne;
  // Trits 2, 0, 1, 1, 0: base-3 value 174, stored as ceil(174 * 256 / 243) = 184.
  a.qs[0] = 184;
  std::memset(a.qs + 1, 128, 47);  // 128 * 3^n = 128 (mod 256): every trit 1 (zero)
  std::memset(a.qh, 128, 4);
  auto y = Decode(DType::kTQ1_0, a);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[32], -1.0f);
  EXPECT_EQ(y[64], 0.0f);
  EXPECT_EQ(y[96], 0.0f);
  EXPECT_EQ(y[128], -1.0f);
  for (int i = 0; i < 256; ++i) {
    if (i % 32 != 0 || i >= 160) {
      ASSERT_EQ(y[i], 0.0f) << i;
    }
  }
  BlockTQ2_0 b{};
  b.d = kOne;
  std::memset(b.qs, 0x55, sizeof b.qs);  // every element 1: zero
  b.qs[33] = 0x56;                       // element 129 (half 1, m = 1): 2 -> +1
  y = Decode(DType::kTQ2_0, b);
  EXPECT_EQ(y[129], 1.0f);
  EXPECT_EQ(y[1], 0.0f);
}

// Values on each type's own grid: a scale that is a power of two, every level present in
// every sub-block, so the searches find the exact scale and every element its exact code.
TEST(QuantLayoutTest, GridValuesRoundTripExactly) {
  const int n = 512;
  struct Case {
    DType type;
    float (*value)(int i);
    float tol;
  };
  const Case cases[] = {
      {DType::kQ4_1, [](int i) { return 0.25f * ((i * 7) % 16) - 1.0f; }, 0},
      {DType::kQ5_1, [](int i) { return 0.25f * ((i * 7) % 32) - 1.0f; }, 0},
      {DType::kQ5_0, [](int i) { return 0.5f * ((i * 7) % 32 - 16); }, 0},
      {DType::kIQ4_NL, [](int i) { return 0.25f * kIq4nlValues[(i * 7) % 16]; }, 0},
      {DType::kIQ4_XS, [](int i) { return 0.25f * kIq4nlValues[(i * 7) % 16]; }, 0},
      {DType::kMXFP4, [](int i) { return 0.5f * kMxfp4Values[(i * 7) % 16]; }, 0},
      {DType::kTQ1_0, [](int i) { return 0.5f * ((i * 7) % 3 - 1); }, 0},
      {DType::kTQ2_0, [](int i) { return 0.5f * ((i * 7) % 3 - 1); }, 0},
      // The searched K types may settle a hair off the lattice: the Q4_K test's tolerance.
      {DType::kQ2_K, [](int i) { return static_cast<float>((i * 5) % 4); }, 0.02f},
      {DType::kQ3_K, [](int i) { return static_cast<float>((i * 5) % 8 - 4); }, 0.02f},
      {DType::kQ5_K, [](int i) { return static_cast<float>((i * 7) % 32); }, 0.05f},
  };
  for (const Case& c : cases) {
    std::vector<float> x(n);
    for (int i = 0; i < n; ++i) x[i] = c.value(i);
    const auto y = RoundTrip(c.type, x);
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(y[i], x[i], c.tol) << DTypeName(c.type) << " at " << i;
    }
  }
}

}  // namespace
}  // namespace tarmac
