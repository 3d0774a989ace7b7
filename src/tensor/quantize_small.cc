// Reference quantizers of the blocks of 32 (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4), of IQ4_XS (IQ4_NL's
// levels under 6-bit sub-block scales) and of the ternary types (see quantize_types.h).
// Q4_1 / Q5_0 / Q5_1 follow llama.cpp's reference rule (min-max, or absmax mapped to the extra
// negative level); the non-uniform IQ4 levels need a scale search, done as for the K-quants: a
// sweep of candidate scales, each refitted by least squares for its codes.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_search.h"
#include "tensor/quantize_types.h"

namespace tarmac::quantize {
using namespace quant_search;  // NOLINT: the helpers this file is built from
namespace {

constexpr int kBlock = 32;

// Packs 32 codes (< 16) as Q4_0 does: element j in the low nibble of byte j, j + 16 high.
void PackNibbles(const uint8_t* codes, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
}

// Packs 32 5-bit codes: low nibbles as PackNibbles, bit 4 of element j at bit j of qh.
void PackQ5(const uint8_t* codes, uint8_t* qs, uint8_t* qh) {
  uint8_t lo[kBlock];
  uint32_t h = 0;
  for (int j = 0; j < kBlock; ++j) {
    lo[j] = codes[j] & 0xF;
    h |= static_cast<uint32_t>(codes[j] >> 4) << j;
  }
  PackNibbles(lo, qs);
  std::memcpy(qh, &h, 4);
}

// Min-max affine block (Q4_1, Q5_1): value = d * q + m, q in [0, nmax].
template <typename Block>
Status FitMinMax(DType type, const float* x, int64_t i, int nmax, Block* b, uint8_t* codes) {
  const float lo = *std::min_element(x, x + kBlock), hi = *std::max_element(x, x + kBlock);
  TARMAC_RETURN_IF_ERROR(ToF16Scale(type, (hi - lo) / nmax, i, &b->d));
  TARMAC_RETURN_IF_ERROR(ToF16Scale(type, lo, i, &b->m));
  const float d = F16ToF32(b->d), m = F16ToF32(b->m);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    codes[j] = static_cast<uint8_t>(std::clamp(RoundToInt((x[j] - m) * id), 0, nmax));
  }
  return Status::Ok();
}

// Index of the IQ4 level nearest v (the lower one on a tie): the count of midpoints between
// consecutive levels that v exceeds, found by a 4-step binary search (the scale search calls
// this ~40 times per weight).
inline int NearestIq4(float v) {
  static constexpr float kMid[15] = {
      (kIq4nlValues[0] + kIq4nlValues[1]) / 2.0f,   (kIq4nlValues[1] + kIq4nlValues[2]) / 2.0f,
      (kIq4nlValues[2] + kIq4nlValues[3]) / 2.0f,   (kIq4nlValues[3] + kIq4nlValues[4]) / 2.0f,
      (kIq4nlValues[4] + kIq4nlValues[5]) / 2.0f,   (kIq4nlValues[5] + kIq4nlValues[6]) / 2.0f,
      (kIq4nlValues[6] + kIq4nlValues[7]) / 2.0f,   (kIq4nlValues[7] + kIq4nlValues[8]) / 2.0f,
      (kIq4nlValues[8] + kIq4nlValues[9]) / 2.0f,   (kIq4nlValues[9] + kIq4nlValues[10]) / 2.0f,
      (kIq4nlValues[10] + kIq4nlValues[11]) / 2.0f, (kIq4nlValues[11] + kIq4nlValues[12]) / 2.0f,
      (kIq4nlValues[12] + kIq4nlValues[13]) / 2.0f, (kIq4nlValues[13] + kIq4nlValues[14]) / 2.0f,
      (kIq4nlValues[14] + kIq4nlValues[15]) / 2.0f};
  int lo = 0;  // levels below lo are below v's nearest
  for (int step = 8; step > 0; step /= 2) {
    if (lo + step - 1 < 15 && v > kMid[lo + step - 1]) lo += step;
  }
  return lo;
}

// Best scale s of value = s * kIq4nlValues[q] for n elements of x (any magnitude), minimising
// sum w (value - x)^2: candidates put the element of largest magnitude on either outermost
// level (a negative s mirrors the levels), stretched by up to +-1 level, each refitted by least
// squares for its codes.
float SearchIq4Scale(const float* x, const float* w, int n) {
  float max, amax;
  SignedAbsMax(x, n, &max, &amax);
  if (amax == 0.0f) return 0.0f;
  float best_s = 0.0f, best_score = -1.0f;
  for (const float outer : {static_cast<float>(kIq4nlValues[0]), static_cast<float>(kIq4nlValues[15])}) {
    for (int step = -10; step <= 10; ++step) {
      // Outer levels lie ~20 apart: 2 units per step sweeps +-1 level.
      const float inv_s = (outer + (outer < 0 ? -2.0f : 2.0f) * step) / max;
      float sqx = 0, sq2 = 0;
      for (int j = 0; j < n; ++j) {
        const float v = kIq4nlValues[NearestIq4(x[j] * inv_s)];
        sqx += w[j] * v * x[j];
        sq2 += w[j] * v * v;
      }
      const float score = sq2 > 0 ? sqx * sqx / sq2 : 0.0f;
      if (sq2 > 0 && score > best_score) best_score = score, best_s = sqx / sq2;
    }
  }
  return best_s;
}

void Iq4Codes(const float* x, int n, float s, uint8_t* codes) {
  const float inv = s != 0.0f ? 1.0f / s : 0.0f;
  for (int j = 0; j < n; ++j) codes[j] = static_cast<uint8_t>(NearestIq4(x[j] * inv));
}

// Trit (0, 1, 2) of x / d.
inline int TritOf(float x, float id) { return std::clamp(RoundToInt(x * id), -1, 1) + 1; }

// n trits (most significant first) packed as TQ1_0 stores them: ceil(v * 256 / 243), v the
// trits' base-3 value padded to 5 trits.
inline uint8_t PackTrits(const int* t, int n) {
  int v = 0;
  for (int k = 0; k < 5; ++k) v = v * 3 + (k < n ? t[k] : 0);
  return static_cast<uint8_t>((v * 256 + 242) / 243);
}

}  // namespace

Status QuantizeQ4_1(const float* x, void* y, int64_t nb, const float* /*importance*/) {
  auto* b = static_cast<BlockQ4_1*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    uint8_t codes[kBlock];
    TARMAC_RETURN_IF_ERROR(FitMinMax(DType::kQ4_1, x, i, 15, &b[i], codes));
    PackNibbles(codes, b[i].qs);
  }
  return Status::Ok();
}

Status QuantizeQ5_1(const float* x, void* y, int64_t nb, const float* /*importance*/) {
  auto* b = static_cast<BlockQ5_1*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    uint8_t codes[kBlock];
    TARMAC_RETURN_IF_ERROR(FitMinMax(DType::kQ5_1, x, i, 31, &b[i], codes));
    PackQ5(codes, b[i].qs, b[i].qh);
  }
  return Status::Ok();
}

Status QuantizeQ5_0(const float* x, void* y, int64_t nb, const float* /*importance*/) {
  auto* b = static_cast<BlockQ5_0*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    float max, amax;
    SignedAbsMax(x, kBlock, &max, &amax);
    // The largest magnitude maps to code 0 (= -16), using all 32 levels on its side.
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kQ5_0, max / -16.0f, i, &b[i].d));
    const float d = F16ToF32(b[i].d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t codes[kBlock];
    for (int j = 0; j < kBlock; ++j) {
      codes[j] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::floor(x[j] * id + 16.5f)), 0, 31));
    }
    PackQ5(codes, b[i].qs, b[i].qh);
  }
  return Status::Ok();
}

Status QuantizeIQ4_NL(const float* x, void* y, int64_t nb, const float* importance) {
  auto* b = static_cast<BlockIQ4_NL*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    float w[kBlock];
    ErrorWeights(x, kBlock, w, importance);
    if (importance != nullptr) importance += kBlock;
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kIQ4_NL, SearchIq4Scale(x, w, kBlock), i, &b[i].d));
    uint8_t codes[kBlock];
    Iq4Codes(x, kBlock, F16ToF32(b[i].d), codes);
    PackNibbles(codes, b[i].qs);
  }
  return Status::Ok();
}

Status QuantizeIQ4_XS(const float* x, void* y, int64_t nb, const float* importance) {
  auto* b = static_cast<BlockIQ4_XS*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float w[kQK_K], s[8];
    ErrorWeights(x, kQK_K, w, importance);
    if (importance != nullptr) importance += kQK_K;
    float max_s = 0.0f, amax_s = 0.0f;
    for (int j = 0; j < 8; ++j) {
      s[j] = SearchIq4Scale(x + kBlock * j, w + kBlock * j, kBlock);
      if (std::fabs(s[j]) > amax_s) amax_s = std::fabs(s[j]), max_s = s[j];
    }
    // 6-bit signed sub-block scales (ls - 32 in [-32, 31]); the largest goes to -32.
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kIQ4_XS, max_s / -32.0f, i, &b[i].d, true));
    const float d = F16ToF32(b[i].d);
    b[i].scales_h = 0;
    std::memset(b[i].scales_l, 0, sizeof b[i].scales_l);
    for (int j = 0; j < 8; ++j) {
      const int ls = (d != 0.0f ? std::clamp(RoundToInt(s[j] / d), -32, 31) : 0) + 32;
      b[i].scales_l[j / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (j % 2)));
      b[i].scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
      uint8_t codes[kBlock];
      Iq4Codes(x + kBlock * j, kBlock, d * (ls - 32), codes);
      PackNibbles(codes, b[i].qs + 16 * j);
    }
  }
  return Status::Ok();
}

Status QuantizeMXFP4(const float* x, void* y, int64_t nb, const float* importance) {
  auto* b = static_cast<BlockMXFP4*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kBlock) {
    float w[kBlock];
    ErrorWeights(x, kBlock, w, importance);
    if (importance != nullptr) importance += kBlock;
    float max, amax;
    SignedAbsMax(x, kBlock, &max, &amax);
    // Candidate exponents: the one that puts amax between levels 8 and 16 (llama.cpp's rule,
    // which clips above 12) and the next one up (no clipping); keep the one with less error.
    // 255 is E8M0's NaN, never written.
    const int e0 = amax > 0.0f ? std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 253) : 0;
    uint8_t best_codes[kBlock] = {};
    float best_err = -1.0f;
    for (int e = e0; e <= e0 + 1; ++e) {
      const float d = E8M0HalfToF32(static_cast<uint8_t>(e));
      uint8_t codes[kBlock];
      float err = 0.0f;
      for (int j = 0; j < kBlock; ++j) {
        int best = 0;
        float be = std::fabs(x[j] - kMxfp4Values[0] * d);
        for (int k = 1; k < 16; ++k) {
          const float ek = std::fabs(x[j] - kMxfp4Values[k] * d);
          if (ek < be) be = ek, best = k;
        }
        codes[j] = static_cast<uint8_t>(best);
        err += w[j] * be * be;
      }
      if (best_err < 0.0f || err < best_err) {
        best_err = err;
        b[i].e = static_cast<uint8_t>(e);
        std::memcpy(best_codes, codes, kBlock);
      }
    }
    PackNibbles(best_codes, b[i].qs);
  }
  return Status::Ok();
}

Status QuantizeTQ1_0(const float* x, void* y, int64_t nb, const float* /*importance*/) {
  auto* b = static_cast<BlockTQ1_0*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max, amax;
    SignedAbsMax(x, kQK_K, &max, &amax);
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kTQ1_0, amax, i, &b[i].d));
    const float d = F16ToF32(b[i].d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int t[5];
    for (int m = 0; m < 32; ++m) {
      for (int n = 0; n < 5; ++n) t[n] = TritOf(x[32 * n + m], id);
      b[i].qs[m] = PackTrits(t, 5);
    }
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 5; ++n) t[n] = TritOf(x[160 + 16 * n + m], id);
      b[i].qs[32 + m] = PackTrits(t, 5);
    }
    for (int j = 0; j < 4; ++j) {
      for (int n = 0; n < 4; ++n) t[n] = TritOf(x[240 + 4 * n + j], id);
      b[i].qh[j] = PackTrits(t, 4);
    }
  }
  return Status::Ok();
}

Status QuantizeTQ2_0(const float* x, void* y, int64_t nb, const float* /*importance*/) {
  auto* b = static_cast<BlockTQ2_0*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max, amax;
    SignedAbsMax(x, kQK_K, &max, &amax);
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kTQ2_0, amax, i, &b[i].d));
    const float d = F16ToF32(b[i].d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::memset(b[i].qs, 0, sizeof b[i].qs);
    for (int e = 0; e < kQK_K; ++e) {
      b[i].qs[32 * (e / 128) + e % 32] |=
          static_cast<uint8_t>(TritOf(x[e], id) << (2 * ((e % 128) / 32)));
    }
  }
  return Status::Ok();
}

}  // namespace tarmac::quantize
