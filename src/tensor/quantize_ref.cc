// Reference quantizers (F32 -> each storage type), bit-compatible with the block layouts of
// quant_blocks.h, so any GGUF reader decodes what these write exactly as DequantizeRowRef does.
//
// Q8_0, Q4_0 and Q8_K follow llama.cpp's conventions (one absmax scale per block; Q4_0 and Q8_K
// map the value of largest magnitude to the most negative code, which gains one level of
// range). Q4_K and Q6_K search for each sub-block's scale (and min) with a small candidate
// sweep followed by weighted least-squares refits, then quantize those per-sub-block scales
// against a per-super-block f16 scale; the derivation is in the comments below.
//
// Pure functions, thread-safe. Non-finite inputs, and values whose scale does not fit an f16,
// are rejected with a Status naming the element or block.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

namespace tarmac {
namespace {

inline int RoundToInt(float x) { return static_cast<int>(std::lrintf(x)); }

Status CheckFinite(DType type, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      return InvalidArgument("cannot quantize to {}: element {} is {}", DTypeName(type), i,
                             x[i]);
    }
  }
  return Status::Ok();
}

// An f16 scale that rounds to infinity would decode every element of its block as inf/NaN.
// round_away: round the magnitude up, never down, so that the largest sub-block scale still
// fits the integer range against the stored (rounded) d instead of clipping. That matters where
// d is an f16 subnormal (d ~ amax/4096 in Q6_K: weights of magnitude 0.05 get d ~ 1e-5, whose
// f16 rounding error reaches percents).
Status ToF16Scale(DType type, float scale, int64_t block, uint16_t* out, bool round_away = false) {
  uint16_t h = F32ToF16(scale);
  if (round_away && std::fabs(F16ToF32(h)) < std::fabs(scale)) ++h;  // sign-magnitude: +1 ulp
  if (!std::isfinite(F16ToF32(h))) {
    return InvalidArgument("cannot quantize to {}: block {} needs scale {} beyond f16 range",
                           DTypeName(type), block, scale);
  }
  *out = h;
  return Status::Ok();
}

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

Status QuantizeQ8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
    float max, amax;
    SignedAbsMax(x, kQK8_0, &max, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kQ8_0, d, i, &y[i].d));
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
  return Status::Ok();
}

Status QuantizeQ4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
    float max, amax;
    SignedAbsMax(x, kQK4_0, &max, &amax);
    // The largest magnitude maps to code 0 (= -8), using all 16 levels on its side.
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kQ4_0, d, i, &y[i].d));
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(std::floor(x[j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(std::floor(x[j + 16] * id + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(std::max(0, q0) | (std::max(0, q1) << 4));
    }
  }
  return Status::Ok();
}

Status QuantizeQ8_K(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max, amax;
    SignedAbsMax(x, kQK_K, &max, &amax);
    std::memset(&y[i], 0, sizeof(BlockQ8_K));
    if (amax == 0.0f) continue;
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, RoundToInt(iscale * x[j])));
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[i].qs[16 * g + j];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
  return Status::Ok();
}

// Round to nearest (ties to even) for |v| < 2^22: adding 1.5 * 2^23 leaves the integer part in
// the low mantissa bits. Much cheaper than lrintf in the inner loops of the searches.
inline int RoundFast(float v) {
  float f = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &f, 4);
  return (bits & 0x007fffff) - 0x00400000;
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

// Weights of the error sums of the K-quant searches: every element counts, larger magnitudes
// more (they dominate dot products), but no single outlier takes the whole budget the way
// x^2 weights let it.
inline void ErrorWeights(const float* x, int n, float* w) {
  float sum2 = 0.0f;
  for (int j = 0; j < n; ++j) sum2 += x[j] * x[j];
  const float rms = std::sqrt(sum2 / n);
  for (int j = 0; j < n; ++j) w[j] = rms + std::fabs(x[j]);
}

// --- Q4_K: value = s * q - m, q in [0, 15], s >= 0, m >= 0 per sub-block of 32. ------------

// Weighted sums of one sub-block that do not depend on the codes.
struct AffineSums {
  float sw = 0, swx = 0, swx2 = 0;
};

// Weighted least squares of x ~ s*q + b over the sub-block, b <= 0 (b = -m). For fixed codes q
// the optimum solves the 2x2 normal equations; if it wants b > 0 the constrained optimum sits
// on b = 0 and s = sum(wqx) / sum(wq^2). Returns the weighted squared error, expanded from the
// sums (sum w (s q + b - x)^2) so the fit needs one pass over the elements.
float FitAffine(const float* x, const float* w, const uint8_t* q, int n, const AffineSums& k,
                float* s, float* b) {
  float swq = 0, swq2 = 0, swqx = 0;
  for (int j = 0; j < n; ++j) {
    const float wq = w[j] * q[j];
    swq += wq;
    swq2 += wq * q[j];
    swqx += wq * x[j];
  }
  const float det = k.sw * swq2 - swq * swq;
  float ss = 0, bb = 0;
  if (det > 0) {
    ss = (k.sw * swqx - swq * k.swx) / det;
    bb = (swq2 * k.swx - swq * swqx) / det;
  }
  if (det <= 0 || bb > 0 || ss < 0) {
    bb = k.sw > 0 ? std::min(0.0f, k.swx / k.sw) : 0.0f;
    ss = swq2 > 0 ? std::max(0.0f, (swqx - bb * swq) / swq2) : 0.0f;
  }
  *s = ss;
  *b = bb;
  return ss * ss * swq2 + 2 * ss * bb * swq + bb * bb * k.sw - 2 * ss * swqx - 2 * bb * k.swx +
         k.swx2;
}

// Codes of x for value = s*q + b, clamped to [0, nmax].
inline void CodesAffine(const float* x, int n, float inv_s, float b, int nmax, uint8_t* q) {
  for (int j = 0; j < n; ++j) {
    q[j] = static_cast<uint8_t>(RoundFast(std::clamp((x[j] - b) * inv_s, 0.0f, float(nmax))));
  }
}

// Best (s >= 0, m >= 0) for one sub-block: sweeps the number of levels the [min, max] range is
// stretched over (nmax-1 .. nmax+1 in 0.1 steps: a slightly wider or narrower grid often fits
// the bulk better than the one pinned to the extremes), refits s and b for each candidate's
// codes, then alternates codes <-> refit on the winner until it stops improving.
// Preconditions: |x| <= 1 (see Normalize).
void SearchAffine(const float* x, const float* w, int n, int nmax, float* s_out, float* m_out) {
  float lo = *std::min_element(x, x + n);
  const float hi = *std::max_element(x, x + n);
  lo = std::min(lo, 0.0f);  // the offset can only subtract
  if (hi <= lo) {
    *s_out = 0.0f;
    *m_out = -lo;
    return;
  }
  AffineSums k;
  for (int j = 0; j < n; ++j) {
    k.sw += w[j];
    k.swx += w[j] * x[j];
    k.swx2 += w[j] * x[j] * x[j];
  }
  uint8_t q[kQK_K], best_q[kQK_K];
  float best_s = (hi - lo) / nmax, best_b = lo;
  CodesAffine(x, n, 1.0f / best_s, best_b, nmax, best_q);
  float best_err = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float diff = best_s * best_q[j] + best_b - x[j];
    best_err += w[j] * diff * diff;
  }
  for (int step = -10; step <= 10; ++step) {
    const float inv_s = (nmax + 0.1f * step) / (hi - lo);
    CodesAffine(x, n, inv_s, lo, nmax, q);
    float s, b;
    const float err = FitAffine(x, w, q, n, k, &s, &b);
    if (err < best_err) {
      best_err = err, best_s = s, best_b = b;
      std::memcpy(best_q, q, n);
    }
  }
  for (int iter = 0; iter < 4 && best_s > 0.0f; ++iter) {
    CodesAffine(x, n, 1.0f / best_s, best_b, nmax, q);
    if (std::memcmp(q, best_q, n) == 0) break;
    float s, b;
    const float err = FitAffine(x, w, q, n, k, &s, &b);
    if (!(err < best_err)) break;
    best_err = err, best_s = s, best_b = b;
    std::memcpy(best_q, q, n);
  }
  *s_out = best_s;
  *m_out = -best_b;
}

Status QuantizeQ4_K(const float* x, BlockQ4_K* y, int64_t nb) {
  constexpr int kSub = 32, kNumSub = kQK_K / kSub;
  float w[kQK_K], xn[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float amax = Normalize(x, kQK_K, xn);
    ErrorWeights(xn, kQK_K, w);
    float s[kNumSub], m[kNumSub];
    float max_s = 0.0f, max_m = 0.0f;
    for (int j = 0; j < kNumSub; ++j) {
      SearchAffine(xn + kSub * j, w + kSub * j, kSub, 15, &s[j], &m[j]);
      s[j] *= amax;
      m[j] *= amax;
      max_s = std::max(max_s, s[j]);
      max_m = std::max(max_m, m[j]);
    }
    // The 8 scales and 8 mins become 6-bit multiples of the super-block's d and dmin; rounding
    // against the f16-rounded d/dmin (not the exact ones) is what the decoder will multiply.
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kQ4_K, max_s / 63.0f, i, &y[i].d, true));
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kQ4_K, max_m / 63.0f, i, &y[i].dmin, true));
    const float d = F16ToF32(y[i].d), dmin = F16ToF32(y[i].dmin);
    uint8_t sc[kNumSub], mq[kNumSub];
    for (int j = 0; j < kNumSub; ++j) {
      sc[j] = static_cast<uint8_t>(d > 0.0f ? std::clamp(RoundToInt(s[j] / d), 0, 63) : 0);
      mq[j] = static_cast<uint8_t>(dmin > 0.0f ? std::clamp(RoundToInt(m[j] / dmin), 0, 63) : 0);
    }
    PackQ4KScaleMin(sc, mq, y[i].scales);
    uint8_t q[kQK_K];
    for (int j = 0; j < kNumSub; ++j) {
      const float ds = d * sc[j], dm = dmin * mq[j];
      if (ds > 0.0f) {
        CodesAffine(x + kSub * j, kSub, 1.0f / ds, -dm, 15, q + kSub * j);
      } else {
        std::memset(q + kSub * j, 0, kSub);
      }
    }
    // Pair (2k, 2k+1) shares 32 bytes: sub-block 2k in the low nibbles, 2k+1 in the high.
    for (int k = 0; k < kNumSub / 2; ++k) {
      for (int l = 0; l < kSub; ++l) {
        y[i].qs[kSub * k + l] =
            static_cast<uint8_t>(q[64 * k + l] | (q[64 * k + kSub + l] << 4));
      }
    }
  }
  return Status::Ok();
}

// --- Q6_K: value = s * q, q in [-32, 31], s signed per sub-block of 16. ---------------------

// Best s for one sub-block. As in Q4_0, the value of largest magnitude goes to -32 (the code
// with one extra level); candidates stretch that mapping by +-1 level in 0.1 steps, each gets
// the least-squares s for its codes (sum(wqx) / sum(wq^2)), then codes <-> s alternate.
// Preconditions: |x| <= 1 (see Normalize).
float SearchSymmetric(const float* x, const float* w, int n) {
  float max, amax;
  SignedAbsMax(x, n, &max, &amax);
  if (amax == 0.0f) return 0.0f;
  auto codes = [&](float inv_s, int8_t* q) {
    for (int j = 0; j < n; ++j) {
      q[j] = static_cast<int8_t>(RoundFast(std::clamp(x[j] * inv_s, -32.0f, 31.0f)));
    }
  };
  // With the least-squares s = sum(wqx) / sum(wq^2) the error is
  // sum(wx^2) - sum(wqx)^2 / sum(wq^2): minimising it maximises the returned score.
  auto fit = [&](const int8_t* q, float* s) {
    float sqx = 0, sq2 = 0;
    for (int j = 0; j < n; ++j) {
      const float wq = w[j] * q[j];
      sqx += wq * x[j];
      sq2 += wq * q[j];
    }
    *s = sq2 > 0 ? sqx / sq2 : 0.0f;
    return sq2 > 0 ? sqx * sqx / sq2 : 0.0f;
  };
  int8_t q[16], best_q[16];
  float best_s = 0.0f, best_score = -1.0f;
  for (int step = -10; step <= 10; ++step) {
    codes(-(32.0f + 0.1f * step) / max, q);
    float s;
    const float score = fit(q, &s);
    if (score > best_score) {
      best_score = score, best_s = s;
      std::memcpy(best_q, q, n);
    }
  }
  for (int iter = 0; iter < 4 && best_s != 0.0f; ++iter) {
    codes(1.0f / best_s, q);
    if (std::memcmp(q, best_q, n) == 0) break;
    float s;
    const float score = fit(q, &s);
    if (!(score > best_score)) break;
    best_score = score, best_s = s;
    std::memcpy(best_q, q, n);
  }
  return best_s;
}

Status QuantizeQ6_K(const float* x, BlockQ6_K* y, int64_t nb) {
  constexpr int kSub = 16, kNumSub = kQK_K / kSub;
  float w[kQK_K], xn[kQK_K];
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    const float amax = Normalize(x, kQK_K, xn);
    ErrorWeights(xn, kQK_K, w);
    float s[kNumSub];
    float max_s = 0.0f, amax_s = 0.0f;
    for (int j = 0; j < kNumSub; ++j) {
      s[j] = SearchSymmetric(xn + kSub * j, w + kSub * j, kSub) * amax;
      if (std::fabs(s[j]) > amax_s) amax_s = std::fabs(s[j]), max_s = s[j];
    }
    // int8 sub-block scales against one f16 d; the largest goes to -128 (full int8 range).
    TARMAC_RETURN_IF_ERROR(ToF16Scale(DType::kQ6_K, max_s / -128.0f, i, &y[i].d, true));
    const float d = F16ToF32(y[i].d);
    int8_t q[kQK_K];
    for (int j = 0; j < kNumSub; ++j) {
      const int sc = d != 0.0f ? std::clamp(RoundToInt(s[j] / d), -128, 127) : 0;
      y[i].scales[j] = static_cast<int8_t>(sc);
      const float ds = d * sc;
      for (int l = 0; l < kSub; ++l) {
        q[kSub * j + l] = static_cast<int8_t>(
            ds != 0.0f ? RoundFast(std::clamp(x[kSub * j + l] / ds, -32.0f, 31.0f)) : 0);
      }
    }
    // Each half of 128 elements: element l (< 32) and its siblings l+32, l+64, l+96 share ql[l]
    // / ql[l+32] (low 4 bits: l and l+32 in low nibbles, l+64 and l+96 in high nibbles) and
    // qh[l] (top 2 bits of l, l+32, l+64, l+96 at bit 0, 2, 4, 6).
    for (int half = 0; half < 2; ++half) {
      uint8_t* ql = y[i].ql + 64 * half;
      uint8_t* qh = y[i].qh + 32 * half;
      const int8_t* qq = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int q1 = qq[l] + 32, q2 = qq[l + 32] + 32, q3 = qq[l + 64] + 32, q4 = qq[l + 96] + 32;
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                     ((q4 >> 4) << 6));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status QuantizeRowRef(DType type, const float* src, void* dst, int64_t n) {
  if (!IsComputeType(type)) {
    return Unimplemented("quantize to {} is not supported", DTypeName(type));
  }
  const int64_t bs = Traits(type).block_size;
  if (n < 0 || n % bs != 0) {
    return InvalidArgument("cannot quantize a row of {} elements to {}: not a multiple of {}", n,
                           DTypeName(type), bs);
  }
  TARMAC_RETURN_IF_ERROR(CheckFinite(type, src, n));
  const int64_t nb = n / bs;
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return Status::Ok();
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        d[i] = F32ToF16(src[i]);
        if ((d[i] & 0x7fff) == 0x7c00) {
          return InvalidArgument("cannot convert to f16: element {} = {} overflows", i, src[i]);
        }
      }
      return Status::Ok();
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        d[i] = F32ToBF16(src[i]);
        if ((d[i] & 0x7fff) == 0x7f80) {
          return InvalidArgument("cannot convert to bf16: element {} = {} overflows", i, src[i]);
        }
      }
      return Status::Ok();
    }
    case DType::kQ8_0: return QuantizeQ8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::kQ4_0: return QuantizeQ4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::kQ4_K: return QuantizeQ4_K(src, static_cast<BlockQ4_K*>(dst), nb);
    case DType::kQ6_K: return QuantizeQ6_K(src, static_cast<BlockQ6_K*>(dst), nb);
    case DType::kQ8_K: return QuantizeQ8_K(src, static_cast<BlockQ8_K*>(dst), nb);
    default: return Unimplemented("quantize to {} is not supported", DTypeName(type));
  }
}

}  // namespace tarmac
