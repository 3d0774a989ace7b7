// The building blocks of the reference quantizers (quantize_ref.cc, quantize_kquants.cc,
// quantize_small.cc): rounding, scale checks, and the per-sub-block scale searches they share.
// Pure functions, thread-safe.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/status.h"
#include "tensor/dtype.h"

namespace tarmac::quant_search {

inline int RoundToInt(float x) { return static_cast<int>(std::lrintf(x)); }

// Round to nearest (ties to even) for |v| < 2^22: adding 1.5 * 2^23 leaves the integer part in
// the low mantissa bits. Much cheaper than lrintf in the inner loops of the searches.
inline int RoundFast(float v) {
  float f = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &f, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// An error naming the first non-finite element of x[0..n).
Status CheckFinite(DType type, const float* x, int64_t n);

// scale as an f16 in *out; an error if it rounds to infinity (every element of the block would
// decode as inf/NaN). round_away: round the magnitude up, never down, so that the largest
// sub-block scale still fits the integer range against the stored (rounded) d instead of
// clipping. That matters where d is an f16 subnormal (d ~ amax/4096 in Q6_K: weights of
// magnitude 0.05 get d ~ 1e-5, whose f16 rounding error reaches percents).
Status ToF16Scale(DType type, float scale, int64_t block, uint16_t* out, bool round_away = false);

// Value of largest magnitude (keeping its sign) and that magnitude.
inline void SignedAbsMax(const float* x, int n, float* max, float* amax) {
  *max = 0.0f;
  *amax = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float a = std::fabs(x[j]);
    if (a > *amax) {
      *amax = a;
      *max = x[j];
    }
  }
}

// The searches run on a super-block divided by its largest magnitude, so all values lie in
// [-1, 1] whatever the input's magnitude: float sums can neither overflow nor underflow, and
// the search is exactly scale-invariant. Returns that magnitude (0 for an all-zero block).
inline float Normalize(const float* x, int n, float* xn) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float inv = amax > 0.0f ? 1.0f / amax : 0.0f;
  for (int j = 0; j < n; ++j) xn[j] = x[j] * inv;
  return amax;
}

// Weights of the error sums of the searches: every element counts, larger magnitudes more
// (they dominate dot products), but no single outlier takes the whole budget the way x^2
// weights let it. importance (may be null): the imatrix's weight of each element, which then
// multiplies these.
inline void ErrorWeights(const float* x, int n, float* w, const float* importance = nullptr) {
  float sum2 = 0.0f;
  for (int j = 0; j < n; ++j) sum2 += x[j] * x[j];
  const float rms = std::sqrt(sum2 / n);
  for (int j = 0; j < n; ++j) w[j] = rms + std::fabs(x[j]);
  if (importance != nullptr) {
    for (int j = 0; j < n; ++j) w[j] *= importance[j];
  }
}

// Codes of x for value = s*q + b, clamped to [0, nmax].
inline void CodesAffine(const float* x, int n, float inv_s, float b, int nmax, uint8_t* q) {
  for (int j = 0; j < n; ++j) {
    q[j] = static_cast<uint8_t>(RoundFast(std::clamp((x[j] - b) * inv_s, 0.0f, float(nmax))));
  }
}

// Best (s >= 0, m >= 0) of value = s*q - m, q in [0, nmax], for one sub-block of n <= 256
// elements, minimising sum w (value - x)^2 (see quant_search.cc).
// Preconditions: |x| <= 1 (see Normalize).
void SearchAffine(const float* x, const float* w, int n, int nmax, float* s_out, float* m_out);

// Best signed s of value = s*q, q in [-nlo, nlo - 1], for one sub-block of n <= 32 elements,
// minimising sum w (value - x)^2. Preconditions: |x| <= 1 (see Normalize).
float SearchSymmetric(const float* x, const float* w, int n, int nlo);

}  // namespace tarmac::quant_search
