// Rotary position embedding (see ops.h): the uncached scalar reference (RopeNorm/RopeNeox), the
// cos/sin cache, and its Highway Apply.

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops_rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h, which re-includes this file once per target.
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/check.h"
#include "kernels/ops.h"

HWY_BEFORE_NAMESPACE();
namespace tarmac::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// Internal linkage: other kernel files compile helpers into the same per-target namespaces,
// and an equally named inline helper there would silently violate the ODR.
namespace {

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// Interleaved pairs (a, b) = (x[2i], x[2i+1]) with the cache row t = [c0,s0,c1,s1,...]:
// x·dup_even(t) + sign·swap_pairs(x)·dup_odd(t) = (a·c − b·s, b·c + a·s), sign = (−, +, ...).
void RopeNormApplyImpl(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* t) {
  const size_t nr = static_cast<size_t>(n_rot);
#if HWY_TARGET != HWY_SCALAR  // one lane: no pairs to shuffle, the scalar loop below runs
  const DF d;
  const size_t N = hn::Lanes(d);
  // -0.0 in even lanes: XOR flips the sign of the b·s product there.
  const VF neg_even = hn::OddEven(hn::Zero(d), hn::Set(d, -0.0f));
  auto rotate = [&](VF v, VF cs) {
    const VF s = hn::Xor(hn::DupOdd(cs), neg_even);
    return hn::MulAdd(v, hn::DupEven(cs), hn::Mul(hn::Reverse2(d, v), s));
  };
#endif
  for (int64_t h = 0; h < n_heads; ++h) {
    float* p = x + h * head_dim;
    size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
    if (N >= 2) {  // pairs never straddle vectors: N and i are even
      for (; i + N <= nr; i += N) {
        hn::StoreU(rotate(hn::LoadU(d, p + i), hn::LoadU(d, t + i)), d, p + i);
      }
      if (i < nr) {  // nr - i is even, so whole pairs land in the buffer
        HWY_ALIGN float bx[kMaxLanes] = {};
        HWY_ALIGN float bt[kMaxLanes] = {};
        const size_t rem = nr - i;
        std::memcpy(bx, p + i, rem * sizeof(float));
        std::memcpy(bt, t + i, rem * sizeof(float));
        hn::Store(rotate(hn::Load(d, bx), hn::Load(d, bt)), d, bx);
        std::memcpy(p + i, bx, rem * sizeof(float));
        i = nr;
      }
    }
#endif
    for (; i < nr; i += 2) {  // single-lane targets only
      const float a = p[i], b = p[i + 1], c = t[i], sn = t[i + 1];
      p[i] = a * c - b * sn;
      p[i + 1] = b * c + a * sn;
    }
  }
}

// Split halves: a = x[i], b = x[i + half]; cache row t = [c0..c_{half-1}, s0..s_{half-1}].
void RopeNeoxApplyImpl(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* t) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t half = static_cast<size_t>(n_rot / 2);
  const float* c = t;
  const float* s = t + half;
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

}  // namespace
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
                float freq_base, float freq_scale, const float* freq_factors, float mscale,
                PairIndex pair) {
  CheckRopeArgs(n_heads, head_dim, n_rot, freq_base);
  TARMAC_CHECK(pos >= 0);
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double theta = RopeAngle(i, n_rot, pos, freq_base, freq_scale, freq_factors);
    const double c = mscale * std::cos(theta), s = mscale * std::sin(theta);
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
              float freq_base, float freq_scale, const float* freq_factors, float mscale) {
  RopeScalar(x, n_heads, head_dim, n_rot, pos, freq_base, freq_scale, freq_factors, mscale,
             [](int64_t i) { return std::pair<int64_t, int64_t>(2 * i, 2 * i + 1); });
}

void RopeNeox(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
              float freq_base, float freq_scale, const float* freq_factors, float mscale) {
  const int64_t half = n_rot / 2;
  RopeScalar(x, n_heads, head_dim, n_rot, pos, freq_base, freq_scale, freq_factors, mscale,
             [half](int64_t i) { return std::pair<int64_t, int64_t>(i, i + half); });
}

RopeYarn MakeRopeYarn(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                      float beta_slow, float ext_factor) {
  TARMAC_CHECK(n_rot >= 2 && n_ctx_orig >= 1 && freq_base > 0 && beta_fast > 0 && beta_slow > 0);
  auto corr_dim = [&](double rotations) {
    return static_cast<double>(n_rot) *
           std::log(static_cast<double>(n_ctx_orig) / (rotations * 2 * 3.14159265358979323846)) /
           (2 * std::log(static_cast<double>(freq_base)));
  };
  RopeYarn y;
  y.ext_factor = ext_factor;
  y.corr_low = static_cast<float>(std::max(0.0, std::floor(corr_dim(beta_fast))));
  y.corr_high = static_cast<float>(std::min(static_cast<double>(n_rot - 1), std::ceil(corr_dim(beta_slow))));
  return y;
}

RopeCache::RopeCache(RopeType type, int64_t n_rot, int64_t max_positions, float freq_base,
                     float freq_scale, const float* freq_factors, float mscale, const RopeYarn& yarn)
    : type_(type), n_rot_(n_rot), max_positions_(max_positions) {
  CheckRopeArgs(0, n_rot, n_rot, freq_base);
  TARMAC_CHECK(max_positions >= 1 && mscale > 0.0f);
  const int64_t pairs = n_rot / 2;
  table_.resize(static_cast<size_t>(max_positions * n_rot));
  const bool use_yarn = yarn.ext_factor != 0.0f;
  const double yarn_mscale =
      use_yarn ? 1.0 + 0.1 * std::log(1.0 / static_cast<double>(freq_scale)) : 1.0;
  for (int64_t pos = 0; pos < max_positions; ++pos) {
    float* t = table_.data() + pos * n_rot;
    for (int64_t i = 0; i < pairs; ++i) {
      double theta = RopeAngle(i, n_rot, pos, freq_base, freq_scale, freq_factors);
      if (use_yarn) {
        const double extrap = RopeAngle(i, n_rot, pos, freq_base, 1.0f, freq_factors);
        const double span = std::max(0.001, static_cast<double>(yarn.corr_high - yarn.corr_low));
        const double ramp =
            (1.0 - std::clamp((static_cast<double>(i) - yarn.corr_low) / span, 0.0, 1.0)) *
            yarn.ext_factor;
        theta = theta * (1.0 - ramp) + extrap * ramp;
      }
      const double ms = mscale * yarn_mscale;
      const float cf = static_cast<float>(ms * std::cos(theta));
      const float sf = static_cast<float>(ms * std::sin(theta));
      if (type == RopeType::kNorm) {
        t[2 * i] = cf;
        t[2 * i + 1] = sf;
      } else {
        t[i] = cf;
        t[pairs + i] = sf;
      }
    }
  }
}

HWY_EXPORT(RopeNormApplyImpl);
HWY_EXPORT(RopeNeoxApplyImpl);

void RopeCache::Apply(float* x, int64_t n_heads, int64_t head_dim, int64_t pos) const {
  TARMAC_CHECK(pos >= 0 && pos < max_positions_);  // else reads outside the cache
  TARMAC_DCHECK(n_heads >= 0 && n_rot_ <= head_dim);
  const float* t = table_.data() + pos * n_rot_;
  if (type_ == RopeType::kNorm) {
    HWY_DYNAMIC_DISPATCH(RopeNormApplyImpl)(x, n_heads, head_dim, n_rot_, t);
  } else {
    HWY_DYNAMIC_DISPATCH(RopeNeoxApplyImpl)(x, n_heads, head_dim, n_rot_, t);
  }
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
