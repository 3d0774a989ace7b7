// The K-quant reference quantizers (see quantize_types.h). Every K type is one of two shapes:
//   affine (Q2_K, Q4_K, Q5_K): value = d * sc * q - dmin * m per sub-block, q in [0, nmax],
//     sc and m unsigned codes against the super-block's f16 d and dmin;
//   symmetric (Q3_K, Q6_K): value = d * sc * q, q in [-nlo, nlo - 1], sc a signed code.
// Each sub-block's scale (and min) is searched on the normalised super-block (quant_search.h),
// the per-sub-block scales are then rounded to codes against the f16 super-block scales, and
// the element codes are chosen against those rounded scales (what the decoder multiplies).
// The shapes differ from each other only in their constants and in how the codes are packed.
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

// One affine super-block, decoded form: codes q, sub-block scale and min codes, d and dmin.
struct AffineSuper {
  uint16_t d = 0, dmin = 0;
  uint8_t sc[16] = {}, m[16] = {};
  uint8_t q[kQK_K] = {};
};

// sub: sub-block length; nmax: largest element code; smax: largest scale / min code.
Status FitAffineSuper(DType type, const float* x, const float* importance, int64_t block, int sub,
                      int nmax, int smax, AffineSuper* out) {
  const int nsub = kQK_K / sub;
  float w[kQK_K], xn[kQK_K];
  const float amax = Normalize(x, kQK_K, xn);
  ErrorWeights(xn, kQK_K, w, importance);
  float s[16], m[16];
  float max_s = 0.0f, max_m = 0.0f;
  for (int j = 0; j < nsub; ++j) {
    SearchAffine(xn + sub * j, w + sub * j, sub, nmax, &s[j], &m[j]);
    s[j] *= amax;
    m[j] *= amax;
    max_s = std::max(max_s, s[j]);
    max_m = std::max(max_m, m[j]);
  }
  // Rounding against the f16-rounded d / dmin (not the exact ones) is what the decoder will
  // multiply.
  TARMAC_RETURN_IF_ERROR(ToF16Scale(type, max_s / smax, block, &out->d, true));
  TARMAC_RETURN_IF_ERROR(ToF16Scale(type, max_m / smax, block, &out->dmin, true));
  const float d = F16ToF32(out->d), dmin = F16ToF32(out->dmin);
  for (int j = 0; j < nsub; ++j) {
    out->sc[j] = static_cast<uint8_t>(d > 0.0f ? std::clamp(RoundToInt(s[j] / d), 0, smax) : 0);
    out->m[j] = static_cast<uint8_t>(dmin > 0.0f ? std::clamp(RoundToInt(m[j] / dmin), 0, smax) : 0);
    const float ds = d * out->sc[j], dm = dmin * out->m[j];
    if (ds > 0.0f) {
      CodesAffine(x + sub * j, sub, 1.0f / ds, -dm, nmax, out->q + sub * j);
    } else {
      std::memset(out->q + sub * j, 0, sub);
    }
  }
  return Status::Ok();
}

// One symmetric super-block of sub-blocks of 16, decoded form: codes q, signed scale codes.
struct SymmetricSuper {
  uint16_t d = 0;
  int sc[16] = {};
  int8_t q[kQK_K] = {};
};

// nlo: element codes in [-nlo, nlo - 1]; slo: scale codes in [-slo, slo - 1] (the largest
// magnitude goes to -slo, the code with one extra level).
Status FitSymmetricSuper(DType type, const float* x, const float* importance, int64_t block,
                         int nlo, int slo, SymmetricSuper* out) {
  constexpr int kSub = 16, kNumSub = kQK_K / kSub;
  float w[kQK_K], xn[kQK_K];
  const float amax = Normalize(x, kQK_K, xn);
  ErrorWeights(xn, kQK_K, w, importance);
  float s[kNumSub];
  float max_s = 0.0f, amax_s = 0.0f;
  for (int j = 0; j < kNumSub; ++j) {
    s[j] = SearchSymmetric(xn + kSub * j, w + kSub * j, kSub, nlo) * amax;
    if (std::fabs(s[j]) > amax_s) amax_s = std::fabs(s[j]), max_s = s[j];
  }
  TARMAC_RETURN_IF_ERROR(ToF16Scale(type, max_s / -static_cast<float>(slo), block, &out->d, true));
  const float d = F16ToF32(out->d);
  const float lo = -static_cast<float>(nlo), hi = static_cast<float>(nlo - 1);
  for (int j = 0; j < kNumSub; ++j) {
    out->sc[j] = d != 0.0f ? std::clamp(RoundToInt(s[j] / d), -slo, slo - 1) : 0;
    const float ds = d * out->sc[j];
    for (int l = 0; l < kSub; ++l) {
      out->q[kSub * j + l] = static_cast<int8_t>(
          ds != 0.0f ? RoundFast(std::clamp(x[kSub * j + l] / ds, lo, hi)) : 0);
    }
  }
  return Status::Ok();
}

// The 2-bit planes of Q2_K / Q3_K: element 128h + 32k + l at bits 2k of qs[32h + l].
void PackLow2(const uint8_t* codes, uint8_t* qs) {
  std::memset(qs, 0, kQK_K / 4);
  for (int e = 0; e < kQK_K; ++e) {
    qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((codes[e] & 3) << (2 * ((e % 128) / 32)));
  }
}

// Pair (2k, 2k+1) of sub-blocks of 32 shares 32 bytes: 2k in the low nibbles, 2k+1 in the high.
void PackNibblePairs(const uint8_t* codes, uint8_t* qs) {
  for (int k = 0; k < 4; ++k) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * k + l] = static_cast<uint8_t>((codes[64 * k + l] & 0xF) |
                                            ((codes[64 * k + 32 + l] & 0xF) << 4));
    }
  }
}

}  // namespace

Status QuantizeQ2_K(const float* x, void* y, int64_t nb, const float* importance) {
  auto* b = static_cast<BlockQ2_K*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    AffineSuper a;
    TARMAC_RETURN_IF_ERROR(FitAffineSuper(DType::kQ2_K, x, importance, i, 16, 3, 15, &a));
    if (importance != nullptr) importance += kQK_K;
    b[i].d = a.d;
    b[i].dmin = a.dmin;
    for (int j = 0; j < 16; ++j) b[i].scales[j] = static_cast<uint8_t>(a.sc[j] | (a.m[j] << 4));
    PackLow2(a.q, b[i].qs);
  }
  return Status::Ok();
}

Status QuantizeQ3_K(const float* x, void* y, int64_t nb, const float* importance) {
  auto* b = static_cast<BlockQ3_K*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    SymmetricSuper s;
    TARMAC_RETURN_IF_ERROR(FitSymmetricSuper(DType::kQ3_K, x, importance, i, 4, 32, &s));
    if (importance != nullptr) importance += kQK_K;
    b[i].d = s.d;
    uint8_t sc[16], codes[kQK_K];
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<uint8_t>(s.sc[j] + 32);
    PackQ3KScales(sc, b[i].scales);
    // Stored as q + 4 in [0, 7]: bit 2 is the hmask bit (clear means -4), bits 0..1 the plane.
    std::memset(b[i].hmask, 0, sizeof b[i].hmask);
    for (int e = 0; e < kQK_K; ++e) {
      codes[e] = static_cast<uint8_t>(s.q[e] + 4);
      b[i].hmask[e % 32] |= static_cast<uint8_t>((codes[e] >> 2) << (e / 32));
    }
    PackLow2(codes, b[i].qs);
  }
  return Status::Ok();
}

Status QuantizeQ4_K(const float* x, void* y, int64_t nb, const float* importance) {
  auto* b = static_cast<BlockQ4_K*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    AffineSuper a;
    TARMAC_RETURN_IF_ERROR(FitAffineSuper(DType::kQ4_K, x, importance, i, 32, 15, 63, &a));
    if (importance != nullptr) importance += kQK_K;
    b[i].d = a.d;
    b[i].dmin = a.dmin;
    PackQ4KScaleMin(a.sc, a.m, b[i].scales);
    PackNibblePairs(a.q, b[i].qs);
  }
  return Status::Ok();
}

Status QuantizeQ5_K(const float* x, void* y, int64_t nb, const float* importance) {
  auto* b = static_cast<BlockQ5_K*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    AffineSuper a;
    TARMAC_RETURN_IF_ERROR(FitAffineSuper(DType::kQ5_K, x, importance, i, 32, 31, 63, &a));
    if (importance != nullptr) importance += kQK_K;
    b[i].d = a.d;
    b[i].dmin = a.dmin;
    PackQ4KScaleMin(a.sc, a.m, b[i].scales);
    PackNibblePairs(a.q, b[i].qs);
    // Bit 4 of element 64p + 32h + l goes to bit 2p + h of qh[l].
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int e = 0; e < kQK_K; ++e) {
      b[i].qh[e % 32] |= static_cast<uint8_t>((a.q[e] >> 4) << (e / 32));
    }
  }
  return Status::Ok();
}

Status QuantizeQ6_K(const float* x, void* y, int64_t nb, const float* importance) {
  auto* b = static_cast<BlockQ6_K*>(y);
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    SymmetricSuper s;
    // int8 sub-block scales: the largest goes to -128 (the full int8 range).
    TARMAC_RETURN_IF_ERROR(FitSymmetricSuper(DType::kQ6_K, x, importance, i, 32, 128, &s));
    if (importance != nullptr) importance += kQK_K;
    b[i].d = s.d;
    for (int j = 0; j < 16; ++j) b[i].scales[j] = static_cast<int8_t>(s.sc[j]);
    // Each half of 128 elements: element l (< 32) and its siblings l+32, l+64, l+96 share ql[l]
    // / ql[l+32] (low 4 bits: l and l+32 in low nibbles, l+64 and l+96 in high nibbles) and
    // qh[l] (top 2 bits of l, l+32, l+64, l+96 at bit 0, 2, 4, 6).
    for (int half = 0; half < 2; ++half) {
      uint8_t* ql = b[i].ql + 64 * half;
      uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* qq = s.q + 128 * half;
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

}  // namespace tarmac::quantize
