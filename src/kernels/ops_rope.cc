// Rotary position embedding (see ops.h): the uncached scalar reference (RopeNorm/RopeNeox), the
// cos/sin cache, and its Highway Apply.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops_rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// foreach_target must come before highway.h.
#include "hwy/highway.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "kernels/ops.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// Interleaved pairs: cs = [c0,c0,c1,c1,...], ss = [-s0,s0,-s1,s1,...], so
// x·cs + swap_pairs(x)·ss = (a·c − b·s, b·c + a·s) for every pair (a, b).
void RopeNormApplyImpl(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                       const float* cs, const float* ss) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t nr = static_cast<size_t>(n_rot);
  for (int64_t h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    size_t i = 0;
    if (N >= 2) {  // pairs never straddle vectors: N and i are even
      for (; i + N <= nr; i += N) {
        const VF v = hn::LoadU(d, p + i);
        const VF r = hn::MulAdd(v, hn::LoadU(d, cs + i), hn::Mul(hn::Reverse2(d, v), hn::LoadU(d, ss + i)));
        hn::StoreU(r, d, p + i);
      }
      if (i < nr) {  // nr - i is even, so whole pairs land in the buffer
        HWY_ALIGN float bx[kMaxLanes] = {};
        HWY_ALIGN float bc[kMaxLanes] = {};
        HWY_ALIGN float bs[kMaxLanes] = {};
        const size_t rem = nr - i;
        std::memcpy(bx, p + i, rem * sizeof(float));
        std::memcpy(bc, cs + i, rem * sizeof(float));
        std::memcpy(bs, ss + i, rem * sizeof(float));
        const VF v = hn::Load(d, bx);
        hn::Store(hn::MulAdd(v, hn::Load(d, bc), hn::Mul(hn::Reverse2(d, v), hn::Load(d, bs))), d,
                  bx);
        std::memcpy(p + i, bx, rem * sizeof(float));
        i = nr;
      }
    }
    for (; i < nr; i += 2) {  // single-lane targets only
      const float a = p[i], b = p[i + 1];
      p[i] = a * cs[i] + b * ss[i];
      p[i + 1] = b * cs[i + 1] + a * ss[i + 1];
    }
  }
}

// Split halves: a = x[i], b = x[i + half], c/s contiguous per pair.
void RopeNeoxApplyImpl(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                       const float* c, const float* s) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t half = static_cast<size_t>(n_rot / 2);
  auto rotate = [&](VF a, VF b, VF cv, VF sv, VF* ra, VF* rb) {
    *ra = hn::MulSub(a, cv, hn::Mul(b, sv));
    *rb = hn::MulAdd(a, sv, hn::Mul(b, cv));
  };
  for (int64_t h = 0; h < n_heads; ++h) {
    float* lo = x + h * head_dim;
    float* hi = lo + half;
    size_t i = 0;
    VF ra, rb;
    for (; i + N <= half; i += N) {
      rotate(hn::LoadU(d, lo + i), hn::LoadU(d, hi + i), hn::LoadU(d, c + i), hn::LoadU(d, s + i),
             &ra, &rb);
      hn::StoreU(ra, d, lo + i);
      hn::StoreU(rb, d, hi + i);
    }
    if (i < half) {
      HWY_ALIGN float ba[kMaxLanes] = {};
      HWY_ALIGN float bb[kMaxLanes] = {};
      HWY_ALIGN float bc[kMaxLanes] = {};
      HWY_ALIGN float bs[kMaxLanes] = {};
      const size_t rem = half - i;
      std::memcpy(ba, lo + i, rem * sizeof(float));
      std::memcpy(bb, hi + i, rem * sizeof(float));
      std::memcpy(bc, c + i, rem * sizeof(float));
      std::memcpy(bs, s + i, rem * sizeof(float));
      rotate(hn::Load(d, ba), hn::Load(d, bb), hn::Load(d, bc), hn::Load(d, bs), &ra, &rb);
      hn::Store(ra, d, ba);
      hn::Store(rb, d, bb);
      std::memcpy(lo + i, ba, rem * sizeof(float));
      std::memcpy(hi + i, bb, rem * sizeof(float));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {
namespace {

void CheckRopeArgs(int64_t n_heads, int64_t head_dim, int64_t n_rot, float freq_base) {
  TARMAC_CHECK(n_heads >= 0);
  TARMAC_CHECK(n_rot >= 0 && n_rot % 2 == 0 && n_rot <= head_dim);
  TARMAC_CHECK(freq_base > 0.0f);
}

// Angle of pair i at position pos, in double (see ops.h for why).
double RopeAngle(int64_t i, int64_t n_rot, int64_t pos, float freq_base, float freq_scale,
                 const float* freq_factors) {
  double inv_freq = static_cast<double>(freq_scale) *
                    std::pow(static_cast<double>(freq_base),
                             -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
  if (freq_factors != nullptr) inv_freq /= static_cast<double>(freq_factors[i]);
  return static_cast<double>(pos) * inv_freq;
}

// first(i) / second(i): element offsets of pair i within a head.
template <class PairIndex>
void RopeScalar(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
                float freq_base, float freq_scale, const float* freq_factors, PairIndex pair) {
  CheckRopeArgs(n_heads, head_dim, n_rot, freq_base);
  TARMAC_CHECK(pos >= 0);
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double theta = RopeAngle(i, n_rot, pos, freq_base, freq_scale, freq_factors);
    const double c = std::cos(theta), s = std::sin(theta);
    const auto [ia, ib] = pair(i);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* p = x + h * head_dim;
      const double a = p[ia], b = p[ib];
      p[ia] = static_cast<float>(a * c - b * s);
      p[ib] = static_cast<float>(a * s + b * c);
    }
  }
}

}  // namespace

void RopeNorm(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
              float freq_base, float freq_scale, const float* freq_factors) {
  RopeScalar(x, n_heads, head_dim, n_rot, pos, freq_base, freq_scale, freq_factors,
             [](int64_t i) { return std::pair<int64_t, int64_t>(2 * i, 2 * i + 1); });
}

void RopeNeox(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
              float freq_base, float freq_scale, const float* freq_factors) {
  const int64_t half = n_rot / 2;
  RopeScalar(x, n_heads, head_dim, n_rot, pos, freq_base, freq_scale, freq_factors,
             [half](int64_t i) { return std::pair<int64_t, int64_t>(i, i + half); });
}

RopeCache::RopeCache(RopeType type, int64_t n_rot, int64_t max_positions, float freq_base,
                     float freq_scale, const float* freq_factors)
    : type_(type), n_rot_(n_rot), max_positions_(max_positions) {
  CheckRopeArgs(0, n_rot, n_rot, freq_base);
  TARMAC_CHECK(max_positions >= 1);
  const int64_t pairs = n_rot / 2;
  row_len_ = type == RopeType::kNorm ? n_rot : pairs;
  cos_.resize(static_cast<size_t>(max_positions * row_len_));
  sin_.resize(cos_.size());
  for (int64_t pos = 0; pos < max_positions; ++pos) {
    float* c = cos_.data() + pos * row_len_;
    float* s = sin_.data() + pos * row_len_;
    for (int64_t i = 0; i < pairs; ++i) {
      const double theta = RopeAngle(i, n_rot, pos, freq_base, freq_scale, freq_factors);
      const float cf = static_cast<float>(std::cos(theta));
      const float sf = static_cast<float>(std::sin(theta));
      if (type == RopeType::kNorm) {
        c[2 * i] = cf;
        c[2 * i + 1] = cf;
        s[2 * i] = -sf;
        s[2 * i + 1] = sf;
      } else {
        c[i] = cf;
        s[i] = sf;
      }
    }
  }
}

HWY_EXPORT(RopeNormApplyImpl);
HWY_EXPORT(RopeNeoxApplyImpl);

void RopeCache::Apply(float* x, int64_t n_heads, int64_t head_dim, int64_t pos) const {
  TARMAC_CHECK(pos >= 0 && pos < max_positions_);  // else reads outside the cache
  TARMAC_DCHECK(n_heads >= 0 && n_rot_ <= head_dim);
  const float* c = cos_.data() + pos * row_len_;
  const float* s = sin_.data() + pos * row_len_;
  if (type_ == RopeType::kNorm) {
    HWY_DYNAMIC_DISPATCH(RopeNormApplyImpl)(x, n_heads, head_dim, n_rot_, c, s);
  } else {
    HWY_DYNAMIC_DISPATCH(RopeNeoxApplyImpl)(x, n_heads, head_dim, n_rot_, c, s);
  }
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
