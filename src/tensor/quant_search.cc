// The reference quantizers' shared searches (see quant_search.h).
#include "tensor/quant_search.h"

#include "tensor/fp16.h"

namespace tarmac::quant_search {
namespace {

// --- Affine fits: value = s * q - m, q in [0, nmax], s >= 0, m >= 0 per sub-block. ---------

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

}  // namespace

Status CheckFinite(DType type, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      return InvalidArgument("cannot quantize to {}: element {} is {}", DTypeName(type), i,
                             x[i]);
    }
  }
  return Status::Ok();
}

Status ToF16Scale(DType type, float scale, int64_t block, uint16_t* out, bool round_away) {
  uint16_t h = F32ToF16(scale);
  if (round_away && std::fabs(F16ToF32(h)) < std::fabs(scale)) ++h;  // sign-magnitude: +1 ulp
  if (!std::isfinite(F16ToF32(h))) {
    return InvalidArgument("cannot quantize to {}: block {} needs scale {} beyond f16 range",
                           DTypeName(type), block, scale);
  }
  *out = h;
  return Status::Ok();
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
  uint8_t q[256], best_q[256];
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


// Best s for one sub-block. As in Q4_0, the value of largest magnitude goes to -nlo (the code
// with one extra level); candidates stretch that mapping by +-1 level in 0.1 steps, each gets
// the least-squares s for its codes (sum(wqx) / sum(wq^2)), then codes <-> s alternate.
// Preconditions: |x| <= 1 (see Normalize).
float SearchSymmetric(const float* x, const float* w, int n, int nlo) {
  float max, amax;
  SignedAbsMax(x, n, &max, &amax);
  if (amax == 0.0f) return 0.0f;
  const float lo = -static_cast<float>(nlo), hi = static_cast<float>(nlo - 1);
  auto codes = [&](float inv_s, int8_t* q) {
    for (int j = 0; j < n; ++j) {
      q[j] = static_cast<int8_t>(RoundFast(std::clamp(x[j] * inv_s, lo, hi)));
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
  int8_t q[32], best_q[32];
  float best_s = 0.0f, best_score = -1.0f;
  for (int step = -10; step <= 10; ++step) {
    codes(-(nlo + 0.1f * step) / max, q);
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


}  // namespace tarmac::quant_search
