// The grid quantization types: codebook tables, block layouts, decoders on hand-built blocks,
// and the quantizers' round trips.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/fp16.h"
#include "tensor/quant_grid_blocks.h"
#include "tensor/quant_grid_tables.h"
#include "tensor/quant_grid_types.h"
#include "tensor/quant_ref.h"

namespace tarmac::quant_grid {
namespace {

template <typename T, size_t N>
uint64_t Sum(const T (&table)[N]) {
  T s = 0;  // wraps modulo 2^(8 sizeof T), as the script computed
  for (T v : table) s = static_cast<T>(s + v);
  return s;
}

template <typename T, size_t N>
uint64_t Xor(const T (&table)[N]) {
  T x = 0;
  for (T v : table) x ^= v;
  return x;
}

// Expected sums and xors were computed by a script from the table text of llama.cpp's
// ggml/src/ggml-common.h (the same text the tables were generated from, after checking it
// against the packed kgrid_* forms of ggml-quants.c): a mistyped or reordered-by-hand entry
// changes them.
TEST(QuantGridTables, SizesAndChecksums) {
  EXPECT_EQ(std::size(kIq2xxsGrid), 256u);
  EXPECT_EQ(std::size(kIq2xsGrid), 512u);
  EXPECT_EQ(std::size(kIq2sGrid), 1024u);
  EXPECT_EQ(std::size(kIq3xxsGrid), 256u);
  EXPECT_EQ(std::size(kIq3sGrid), 512u);
  EXPECT_EQ(std::size(kIq1sGrid), 2048u);
  EXPECT_EQ(std::size(kKsignsIq2xs), 128u);
  EXPECT_EQ(std::size(kKmaskIq2xs), 8u);

  EXPECT_EQ(Sum(kIq2xxsGrid), 0x8b267e217ce24363u);
  EXPECT_EQ(Xor(kIq2xxsGrid), 0x0000003232003211u);
  EXPECT_EQ(Sum(kIq2xsGrid), 0x2a14e555100396a1u);
  EXPECT_EQ(Xor(kIq2xsGrid), 0x0000001100323211u);
  EXPECT_EQ(Sum(kIq2sGrid), 0x75fe5f6cc209e3f2u);
  EXPECT_EQ(Xor(kIq2sGrid), 0x2311322332323232u);
  EXPECT_EQ(Sum(kIq3xxsGrid), 0x3a8b433au);
  EXPECT_EQ(Xor(kIq3xxsGrid), 0x0a0a3222u);
  EXPECT_EQ(Sum(kIq3sGrid), 0x68949e56u);
  EXPECT_EQ(Xor(kIq3sGrid), 0x0c00020eu);
  EXPECT_EQ(Sum(kIq1sGrid), 0x69564f615572510cu);
  EXPECT_EQ(Xor(kIq1sGrid), 0xff01feff0101fefeu);
}

TEST(QuantGridTables, SpotValues) {
  EXPECT_EQ(kIq2xxsGrid[0], 0x0808080808080808u);
  EXPECT_EQ(kIq2xxsGrid[1], 0x080808080808082bu);
  EXPECT_EQ(kIq2xxsGrid[255], 0x2b2b2b1908081908u);
  EXPECT_EQ(kIq2xsGrid[5], 0x0808080808190819u);
  EXPECT_EQ(kIq2xsGrid[511], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(kIq2sGrid[516], 0x1908081919082b19u);
  EXPECT_EQ(kIq2sGrid[1023], 0x2b2b2b2b2b2b2b2bu);
  EXPECT_EQ(kIq3xxsGrid[0], 0x04040404u);
  EXPECT_EQ(kIq3xxsGrid[255], 0x3e341c04u);
  EXPECT_EQ(kIq3sGrid[257], 0x05090705u);
  EXPECT_EQ(kIq3sGrid[511], 0x0f0f0101u);
  EXPECT_EQ(kIq1sGrid[0], 0xffffffffffffffffu);
  EXPECT_EQ(kIq1sGrid[1], 0xffffffffffffff01u);
  EXPECT_EQ(kIq1sGrid[1024], 0x0000000000ff0100u);
  EXPECT_EQ(kIq1sGrid[2047], 0x0101010101010101u);
  EXPECT_EQ(kIq1Delta, 0.125f);
}

// Every byte of every entry is one the type allows; entries are distinct and listed in
// increasing order (unsigned for the magnitude grids; for the signed IQ1 grid, by int8 value
// from the last byte to the first), which a swapped or duplicated entry would break.
template <typename T, size_t N>
void ExpectGrid(const T (&grid)[N], int dim, const std::vector<int>& allowed, bool is_signed) {
  for (size_t k = 0; k < N; ++k) {
    for (int j = 0; j < dim; ++j) {
      const uint8_t byte = GridByte(grid[k], j);
      const int v = is_signed ? static_cast<int8_t>(byte) : byte;
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), v), allowed.end())
          << "entry " << k << " byte " << j << " = " << v;
    }
    if (k == 0) continue;
    bool less = false;
    for (int j = dim - 1; j >= 0; --j) {
      const uint8_t a = GridByte(grid[k - 1], j), b = GridByte(grid[k], j);
      const int va = is_signed ? static_cast<int8_t>(a) : a;
      const int vb = is_signed ? static_cast<int8_t>(b) : b;
      if (va != vb) {
        less = va < vb;
        break;
      }
    }
    EXPECT_TRUE(less) << "entries " << k - 1 << " and " << k << " out of order";
  }
}

TEST(QuantGridTables, EntriesUseTheTypesValues) {
  const std::vector<int> iq2 = {0x08, 0x19, 0x2b};
  ExpectGrid(kIq2xxsGrid, 8, iq2, false);
  ExpectGrid(kIq2xsGrid, 8, iq2, false);
  ExpectGrid(kIq2sGrid, 8, iq2, false);
  ExpectGrid(kIq3xxsGrid, 4, {0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3e}, false);
  ExpectGrid(kIq3sGrid, 4, {1, 3, 5, 7, 9, 11, 13, 15}, false);
  ExpectGrid(kIq1sGrid, 8, {-1, 0, 1}, true);
}

TEST(QuantGridTables, SignTables) {
  for (int j = 0; j < 8; ++j) EXPECT_EQ(kKmaskIq2xs[j], 1 << j);
  for (int s = 0; s < 128; ++s) {
    EXPECT_EQ(std::popcount(static_cast<unsigned>(kKsignsIq2xs[s])) % 2, 0) << s;
    EXPECT_EQ(kKsignsIq2xs[s] & 127, s);
  }
  EXPECT_EQ(kKsignsIq2xs[1], 129);
  EXPECT_EQ(kKsignsIq2xs[3], 3);
  EXPECT_EQ(kKsignsIq2xs[127], 255);
}

TEST(QuantGridBlocks, Sizes) {
  EXPECT_EQ(sizeof(BlockIQ2_XXS), 66u);
  EXPECT_EQ(sizeof(BlockIQ2_XS), 74u);
  EXPECT_EQ(sizeof(BlockIQ2_S), 82u);
  EXPECT_EQ(sizeof(BlockIQ3_XXS), 98u);
  EXPECT_EQ(sizeof(BlockIQ3_S), 110u);
  EXPECT_EQ(sizeof(BlockIQ1_S), 50u);
  EXPECT_EQ(sizeof(BlockIQ1_M), 56u);
}

constexpr uint16_t kOne = 0x3C00;  // 1.0 as f16

void ExpectValues(const std::vector<float>& y, int first, const std::vector<float>& want) {
  for (size_t j = 0; j < want.size(); ++j) {
    EXPECT_EQ(y[first + j], want[j]) << "value " << first + j;
  }
}

// The expected values below are worked out by hand from the field descriptions of
// quant_grid_blocks.h and the grid entries of SpotValues.
TEST(QuantGridDequant, HandBuiltIq2xxs) {
  BlockIQ2_XXS b{};
  b.d = kOne;
  // Sub-block 0: group indices 1, 2, 0, 255; group 0 sign bits 0000001 (ksigns 129: values 0
  // and 7 negative); scale 3: db = (0.5 + 3) / 4 = 0.875.
  b.qs[0] = 1 | (2 << 8);
  b.qs[1] = 0 | (255 << 8);
  const uint32_t meta = 1u | (3u << 28);
  b.qs[2] = static_cast<uint16_t>(meta);
  b.qs[3] = static_cast<uint16_t>(meta >> 16);
  std::vector<float> y(256);
  DequantIQ2_XXS(&b, y.data(), 1);
  ExpectValues(y, 0, {-37.625f, 7, 7, 7, 7, 7, 7, -7});
  ExpectValues(y, 8, {21.875f, 21.875f, 7, 7, 7, 7, 7, 7});
  ExpectValues(y, 24, {7, 25 * 0.875f, 7, 7, 25 * 0.875f, 43 * 0.875f, 43 * 0.875f, 43 * 0.875f});
  // Other sub-blocks: index 0 (all 8), scale 0: db = 0.125.
  for (int j = 32; j < 256; ++j) EXPECT_EQ(y[j], 1.0f);
}

TEST(QuantGridDequant, HandBuiltIq2xs) {
  BlockIQ2_XS b{};
  b.d = kOne;
  b.qs[0] = 5 | (3 << 9);  // entry 5 = bytes 25, 8, 25, 8...; signs 3: values 0, 1 negative
  b.scales[0] = 0x21;      // first 16: s = 1 (db 0.375); last 16: s = 2 (db 0.625)
  std::vector<float> y(256);
  DequantIQ2_XS(&b, y.data(), 1);
  ExpectValues(y, 0, {-9.375f, -3, 9.375f, 3, 3, 3, 3, 3});
  ExpectValues(y, 8, {3, 3, 3, 3, 3, 3, 3, 3});
  ExpectValues(y, 16, {5, 5, 5, 5, 5, 5, 5, 5});
  EXPECT_EQ(y[32], 1.0f);
}

TEST(QuantGridDequant, HandBuiltIq2s) {
  BlockIQ2_S b{};
  b.d = kOne;
  b.qs[0] = 0x04;   // low bits of group 0's index ...
  b.qh[0] = 0xC2;   // ... high bits 2: index 516; group 3: high bits 3, low 0: index 768
  b.qs[32] = 0x80;  // group 0: value 7 negative
  b.scales[0] = 5;  // first 16: db = 5.5 / 4 = 1.375; last 16: s = 0, db = 0.125
  std::vector<float> y(256);
  DequantIQ2_S(&b, y.data(), 1);
  // Entry 516 = 0x1908081919082b19: bytes 25, 43, 8, 25, 25, 8, 8, 25.
  ExpectValues(y, 0, {34.375f, 59.125f, 11, 34.375f, 34.375f, 11, 11, -34.375f});
  ExpectValues(y, 8, {11, 11, 11, 11, 11, 11, 11, 11});
  const uint64_t e768 = kIq2sGrid[768];
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[24 + j], 0.125f * GridByte(e768, j));
}

TEST(QuantGridDequant, HandBuiltIq3xxs) {
  BlockIQ3_XXS b{};
  b.d = kOne;
  b.qs[1] = 255;  // group 0: entries 0 (4, 4, 4, 4) and 255 (4, 28, 52, 62)
  const uint32_t meta = 64u | (1u << 28);  // sign bits 1000000 (ksigns 192: 6, 7); db = 0.75
  std::memcpy(b.qs + 64, &meta, 4);
  std::vector<float> y(256);
  DequantIQ3_XXS(&b, y.data(), 1);
  ExpectValues(y, 0, {3, 3, 3, 3, 3, 21, -39, -46.5f});
  ExpectValues(y, 8, {3, 3, 3, 3, 3, 3, 3, 3});
  EXPECT_EQ(y[32], 1.0f);  // index 0, scale 0: db = 0.25, times 4
}

TEST(QuantGridDequant, HandBuiltIq3s) {
  BlockIQ3_S b{};
  b.d = kOne;
  b.qs[0] = 1;
  b.qh[0] = 1;         // cell 0: index 257 = bytes 5, 7, 9, 5; cell 1: index 0 = 1, 1, 1, 1
  b.signs[0] = 0x0F;   // first four negative
  b.scales[0] = 0x02;  // sub-block 0: db = 1 + 2 * 2 = 5; sub-block 1: db = 1
  std::vector<float> y(256);
  DequantIQ3_S(&b, y.data(), 1);
  ExpectValues(y, 0, {-25, -35, -45, -25, 5, 5, 5, 5});
  ExpectValues(y, 8, {5, 5, 5, 5, 5, 5, 5, 5});
  EXPECT_EQ(y[32], 1.0f);
}

TEST(QuantGridDequant, HandBuiltIq1s) {
  BlockIQ1_S b{};
  b.d = kOne;
  b.qs[1] = 0xFF;
  // Group 1 index 0x7FF (all +1), scale 2 (dl = 5), negative delta.
  b.qh[0] = static_cast<uint16_t>((7 << 3) | (2 << 12) | 0x8000);
  std::vector<float> y(256);
  DequantIQ1_S(&b, y.data(), 1);
  ExpectValues(y, 0, {-5.625f, -5.625f, -5.625f, -5.625f, -5.625f, -5.625f, -5.625f, -5.625f});
  ExpectValues(y, 8, {4.375f, 4.375f, 4.375f, 4.375f, 4.375f, 4.375f, 4.375f, 4.375f});
  EXPECT_EQ(y[32], -0.875f);  // sub-block 1: index 0, scale 0, positive delta: -1 + 0.125
}

TEST(QuantGridDequant, HandBuiltIq1m) {
  BlockIQ1_M b{};
  // d = 0.5 = f16 0x3800: nibbles 0, 0, 8, 3 in the tops of the four scale words. Sub-block 0:
  // first 16 s = 1 (dl 1.5), last 16 s = 3 (dl 3.5).
  const uint16_t sc[4] = {1 | (3 << 3), 0, 0x8000, 0x3000};
  std::memcpy(b.scales, sc, 8);
  b.qs[0] = 0xFF;
  b.qh[0] = 0x8F;  // group 0: high bits 7 (index 2047, all +1), negative delta; group 1: index
                   // 0 (all -1), negative delta
  std::vector<float> y(256);
  DequantIQ1_M(&b, y.data(), 1);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[j], 1.3125f);
  for (int j = 8; j < 16; ++j) EXPECT_EQ(y[j], -1.6875f);
  for (int j = 16; j < 24; ++j) EXPECT_EQ(y[j], -3.0625f);  // index 0, positive delta
  EXPECT_EQ(y[32], -0.4375f);                               // sub-block 1: s = 0, dl = 0.5
}

// The seven types behind one interface.
struct GridType {
  const char* name;
  int block_bytes;
  void (*dequant)(const void*, float*, int64_t);
  Status (*quantize)(const float*, void*, int64_t, const float*);
  double max_rel_rmse;  // bound for Gaussian rows; see RoundTripGaussian
};

// Bounds: the relative RMS errors measured on the rows of RoundTripGaussian (IQ2_XXS 0.332,
// IQ2_XS 0.287, IQ2_S 0.240, IQ3_XXS 0.177, IQ3_S 0.130, IQ1_S 0.455, IQ1_M 0.424 when these
// bounds were set) plus about 15% for other compilers and libm.
const GridType kTypes[] = {
    {"IQ2_XXS", 66, DequantIQ2_XXS, QuantizeIQ2_XXS, 0.38},
    {"IQ2_XS", 74, DequantIQ2_XS, QuantizeIQ2_XS, 0.33},
    {"IQ2_S", 82, DequantIQ2_S, QuantizeIQ2_S, 0.28},
    {"IQ3_XXS", 98, DequantIQ3_XXS, QuantizeIQ3_XXS, 0.20},
    {"IQ3_S", 110, DequantIQ3_S, QuantizeIQ3_S, 0.15},
    {"IQ1_S", 50, DequantIQ1_S, QuantizeIQ1_S, 0.52},
    {"IQ1_M", 56, DequantIQ1_M, QuantizeIQ1_M, 0.49},
};

bool IsIq1(const GridType& t) { return t.name[2] == '1'; }

std::vector<float> Gaussian(int64_t n, uint32_t seed, float sigma = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> RoundTrip(const GridType& t, const std::vector<float>& x,
                             const float* importance = nullptr) {
  const int64_t nb = static_cast<int64_t>(x.size()) / 256;
  std::vector<uint8_t> q(nb * t.block_bytes);
  const Status st = t.quantize(x.data(), q.data(), nb, importance);
  EXPECT_TRUE(st.ok()) << t.name << ": " << st.ToString();
  std::vector<float> y(x.size());
  t.dequant(q.data(), y.data(), nb);
  return y;
}

double RelRmse(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    s += double(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

TEST(QuantGridQuantize, RoundTripGaussian) {
  const std::vector<float> x = Gaussian(16 * 256, 7);
  for (const GridType& t : kTypes) {
    const double err = RelRmse(x, RoundTrip(t, x));
    std::printf("%-8s relative RMS error %.4f\n", t.name, err);
    EXPECT_LT(err, t.max_rel_rmse) << t.name;
  }
}

// The search runs on each block divided by its largest magnitude, so the fit does not depend on
// the data's scale as long as d stays a normal f16.
TEST(QuantGridQuantize, RoundTripAtOtherMagnitudes) {
  for (float sigma : {3e-3f, 1.0f, 300.0f}) {
    const std::vector<float> x = Gaussian(8 * 256, 11, sigma);
    for (const GridType& t : kTypes) {
      EXPECT_LT(RelRmse(x, RoundTrip(t, x)), t.max_rel_rmse) << t.name << " sigma " << sigma;
    }
  }
}

// Except where a group's sign parity forces one flip (IQ2_XXS, IQ2_XS, IQ3_XXS: always its
// smallest weight), the magnitude grids keep every sign; a weight of two standard deviations is
// never the one flipped here.
TEST(QuantGridQuantize, LargeWeightsKeepTheirSign) {
  const std::vector<float> x = Gaussian(8 * 256, 5);
  for (const GridType& t : kTypes) {
    if (IsIq1(t)) continue;  // signed grids: a sign is a codebook choice there
    const std::vector<float> y = RoundTrip(t, x);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::fabs(x[i]) > 0.04f) {
        EXPECT_EQ(x[i] > 0, y[i] > 0) << t.name << " weight " << i;
      }
    }
  }
}

// Importance weights buy accuracy where they are large: the importance-weighted error is lower
// when the quantizer is told the importance than when it is not.
TEST(QuantGridQuantize, ImportanceLowersTheWeightedError) {
  const int64_t n = 16 * 256;
  const std::vector<float> x = Gaussian(n, 13);
  std::vector<float> imp(n, 1.0f);
  for (int64_t i = 0; i < n; i += 16) imp[i] = imp[i + 5] = 100.0f;
  auto weighted = [&](const std::vector<float>& y) {
    double e = 0;
    for (int64_t i = 0; i < n; ++i) e += imp[i] * (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    return e;
  };
  for (const GridType& t : kTypes) {
    const double with = weighted(RoundTrip(t, x, imp.data()));
    const double without = weighted(RoundTrip(t, x));
    std::printf("%-8s importance-weighted error %.3g with, %.3g without\n", t.name, with, without);
    EXPECT_LT(with, 0.9 * without) << t.name;
  }
}

TEST(QuantGridQuantize, ZeroRowsDecodeToZeros) {
  const std::vector<float> x(4 * 256, 0.0f);
  const std::vector<float> imp(4 * 256, 1.0f);
  for (const GridType& t : kTypes) {
    for (const float* importance : {static_cast<const float*>(nullptr), imp.data()}) {
      const std::vector<float> y = RoundTrip(t, x, importance);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], 0.0f) << t.name << " value " << i;
    }
  }
}

// One all-zero block among others: it decodes to zeros, the others are unaffected.
TEST(QuantGridQuantize, ZeroBlockBesideOthers) {
  std::vector<float> x = Gaussian(3 * 256, 17);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  for (const GridType& t : kTypes) {
    const std::vector<float> y = RoundTrip(t, x);
    for (int i = 256; i < 512; ++i) ASSERT_EQ(y[i], 0.0f) << t.name << " value " << i;
    EXPECT_LT(RelRmse(x, y), t.max_rel_rmse) << t.name;
  }
}

TEST(QuantGridQuantize, ScaleBeyondF16IsAnError) {
  std::vector<float> x = Gaussian(2 * 256, 19);
  x[300] = 1e9f;  // block 1 needs d far above 65504
  for (const GridType& t : kTypes) {
    std::vector<uint8_t> q(2 * t.block_bytes);
    const Status st = t.quantize(x.data(), q.data(), 2, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << t.name;
    EXPECT_NE(st.message().find("block 1"), std::string::npos) << st.message();
  }
}

// Random bytes with a finite d are valid blocks of every type: they decode to finite values
// within d * (largest sub-block scale) * (largest grid magnitude).
TEST(QuantGridDequant, RandomBlocksDecodeFinite) {
  std::mt19937 rng(23);
  const int nb = 256;
  for (const GridType& t : kTypes) {
    std::vector<uint8_t> q(nb * t.block_bytes);
    for (uint8_t& b : q) b = static_cast<uint8_t>(rng());
    for (int i = 0; i < nb; ++i) {
      const uint16_t d = F32ToF16(std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10));
      uint8_t* block = q.data() + i * t.block_bytes;
      if (std::string(t.name) == "IQ1_M") {  // d lives in the top nibbles of the scale words
        uint16_t sc[4];
        std::memcpy(sc, block + 48, 8);
        for (int k = 0; k < 4; ++k) {
          sc[k] = static_cast<uint16_t>((sc[k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12));
        }
        std::memcpy(block + 48, sc, 8);
      } else {
        std::memcpy(block, &d, 2);
      }
    }
    std::vector<float> y(nb * 256);
    t.dequant(q.data(), y.data(), nb);
    for (int i = 0; i < nb; ++i) {
      // Bounds per type: IQ2 15.5 / 4 * 43, IQ3_XXS 15.5 / 2 * 62, IQ3_S 31 * 15, IQ1 15 * 1.125.
      const double bound = 1024.0 * 481;
      for (int j = 0; j < 256; ++j) {
        const float v = y[i * 256 + j];
        ASSERT_TRUE(std::isfinite(v)) << t.name;
        ASSERT_LE(std::fabs(v), bound) << t.name;
      }
    }
  }
}

// make-random's blocks: valid (finite), at the asked RMS (within the f16 rounding of d),
// deterministic in the seed.
TEST(QuantGridRandom, BlocksHaveTheAskedRmsAndFollowTheSeed) {
  for (DType t : {DType::kIQ2_XXS, DType::kIQ2_XS, DType::kIQ2_S, DType::kIQ3_XXS, DType::kIQ3_S,
                  DType::kIQ1_S, DType::kIQ1_M}) {
    ASSERT_TRUE(IsGridType(t));
    const int64_t nb = 12, bytes = nb * Traits(t).type_size;
    std::vector<uint8_t> a(bytes), b(bytes), c(bytes);
    RandomGridBlocks(t, 7, 0.02f, a.data(), nb);
    RandomGridBlocks(t, 7, 0.02f, b.data(), nb);
    RandomGridBlocks(t, 8, 0.02f, c.data(), nb);
    EXPECT_EQ(a, b) << DTypeName(t);
    EXPECT_NE(a, c) << DTypeName(t);
    std::vector<float> y(nb * 256);
    DequantizeRowRef(t, a.data(), y.data(), nb * 256);
    for (int64_t i = 0; i < nb; ++i) {
      double sum2 = 0;
      for (int j = 0; j < 256; ++j) {
        ASSERT_TRUE(std::isfinite(y[i * 256 + j]));
        sum2 += double(y[i * 256 + j]) * y[i * 256 + j];
      }
      EXPECT_NEAR(std::sqrt(sum2 / 256), 0.02, 0.02 * 1e-3) << DTypeName(t) << " block " << i;
    }
  }
  EXPECT_FALSE(IsGridType(DType::kQ4_K));
}

}  // namespace
}  // namespace tarmac::quant_grid
