// Highway kernels for RmsNorm, softmax, activations, elementwise ops and reductions (see ops.h).
// This file is compiled once per SIMD target through foreach_target.h; the public functions at
// the bottom (HWY_ONCE) check preconditions and dispatch at run time.
//
// Tails (n not a multiple of the vector length) go through a zero- or -inf-padded stack buffer
// of one vector rather than masked loads: Highway 1.0.3 emulates MaskedLoad on SSE4/AVX2 for
// some lane types with a full-width load, which would read past the row.

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must follow foreach_target.h, which re-includes this file once per target.
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

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
constexpr size_t kMaxLanesF = HWY_MAX_BYTES / sizeof(float);
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Loads the last `rem` (< one vector) elements of a row into a vector padded with `pad`.
HWY_INLINE VF LoadTail(DF d, const float* p, size_t rem, float pad) {
  HWY_ALIGN float buf[kMaxLanesF];
  for (size_t j = 0; j < kMaxLanesF; ++j) buf[j] = pad;
  std::memcpy(buf, p, rem * sizeof(float));
  return hn::Load(d, buf);
}
HWY_INLINE void StoreTail(DF d, VF v, float* p, size_t rem) {
  HWY_ALIGN float buf[kMaxLanesF];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, rem * sizeof(float));
}

// out[i] = f(x[i]) vector by vector; out may equal x.
template <class F>
HWY_INLINE void MapUnary(const float* x, float* out, int64_t n, F f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  const size_t un = static_cast<size_t>(n);
  for (; i + N <= un; i += N) hn::StoreU(f(d, hn::LoadU(d, x + i)), d, out + i);
  if (i < un) StoreTail(d, f(d, LoadTail(d, x + i, un - i, 0.0f)), out + i, un - i);
}

template <class F>
HWY_INLINE void MapBinary(const float* a, const float* b, float* out, int64_t n, F f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  const size_t un = static_cast<size_t>(n);
  for (; i + N <= un; i += N) {
    hn::StoreU(f(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  }
  if (i < un) {
    const size_t rem = un - i;
    StoreTail(d, f(d, LoadTail(d, a + i, rem, 0.0f), LoadTail(d, b + i, rem, 0.0f)), out + i, rem);
  }
}

// Σ g(a[i], b[i]) with four accumulators: independent FMA chains hide latency and the partial
// sums keep rounding error well below a single serial sum's.
template <class G>
HWY_INLINE float Reduce2(const float* a, const float* b, int64_t n, G g) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t un = static_cast<size_t>(n);
  VF s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * N <= un; i += 4 * N) {
    s0 = g(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
    s1 = g(d, hn::LoadU(d, a + i + N), hn::LoadU(d, b + i + N), s1);
    s2 = g(d, hn::LoadU(d, a + i + 2 * N), hn::LoadU(d, b + i + 2 * N), s2);
    s3 = g(d, hn::LoadU(d, a + i + 3 * N), hn::LoadU(d, b + i + 3 * N), s3);
  }
  for (; i + N <= un; i += N) s0 = g(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i), s0);
  if (i < un) {
    s1 = g(d, LoadTail(d, a + i, un - i, 0.0f), LoadTail(d, b + i, un - i, 0.0f), s1);
  }
  const VF s = hn::Add(hn::Add(s0, s1), hn::Add(s2, s3));
  return hn::GetLane(hn::SumOfLanes(d, s));
}

HWY_INLINE float MaxRow(const float* x, size_t n) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF m0 = hn::Set(d, kNegInf), m1 = m0;
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    m0 = hn::Max(m0, hn::LoadU(d, x + i));
    m1 = hn::Max(m1, hn::LoadU(d, x + i + N));
  }
  for (; i + N <= n; i += N) m0 = hn::Max(m0, hn::LoadU(d, x + i));
  if (i < n) m1 = hn::Max(m1, LoadTail(d, x + i, n - i, kNegInf));
  return hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
}

// sigmoid(x) from e = exp(-|x|) in (0, 1]: never overflows, and for x < 0 uses e/(1+e)
// instead of 1 - 1/(1+e) so tiny results keep their relative precision.
HWY_INLINE VF Sigmoid(DF d, VF x) {
  const VF one = hn::Set(d, 1.0f);
  const VF e = hn::Exp(d, hn::Neg(hn::Abs(x)));
  const VF r = hn::Div(one, hn::Add(one, e));
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(e, r), r);
}

// ------------------------------------------------------------------------------ kernels

void RmsNormImpl(const float* x, const float* weight, int64_t n, float eps, float* out) {
  const float ss = Reduce2(x, x, n, [](DF, VF a, VF b, VF acc) { return hn::MulAdd(a, b, acc); });
  // One scalar in double: free, and keeps the scale's own rounding to a single step.
  const float inv =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(ss) / static_cast<double>(n) + eps));
  MapBinary(x, weight, out, n,
            [inv](DF d, VF v, VF w) { return hn::Mul(hn::Mul(v, hn::Set(d, inv)), w); });
}

// exp(x·scale − max·scale) written back into x, returning the sum. Padding lanes of the tail
// are -inf so they add exp(-inf) = 0.
void SoftmaxImpl(float* x, int64_t n, float scale) {
  const size_t un = static_cast<size_t>(n);
  if (un == 0) return;
  const float mx = MaxRow(x, un);
  if (mx == kNegInf) {  // fully masked row: defined as all zeros (see ops.h)
    std::memset(x, 0, un * sizeof(float));
    return;
  }
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vscale = hn::Set(d, scale);
  const VF vms = hn::Set(d, mx * scale);
  // x·scale − max·scale in one FMA; for scale == 1 this is exactly x − max.
  auto ex = [&](VF v) { return hn::Exp(d, hn::MulSub(v, vscale, vms)); };
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= un; i += 2 * N) {
    const VF e0 = ex(hn::LoadU(d, x + i));
    const VF e1 = ex(hn::LoadU(d, x + i + N));
    hn::StoreU(e0, d, x + i);
    hn::StoreU(e1, d, x + i + N);
    s0 = hn::Add(s0, e0);
    s1 = hn::Add(s1, e1);
  }
  for (; i + N <= un; i += N) {
    const VF e0 = ex(hn::LoadU(d, x + i));
    hn::StoreU(e0, d, x + i);
    s0 = hn::Add(s0, e0);
  }
  if (i < un) {
    const VF e1 = ex(LoadTail(d, x + i, un - i, kNegInf));
    StoreTail(d, e1, x + i, un - i);
    s1 = hn::Add(s1, e1);
  }
  const float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));  // >= 1: max gives exp(0)
  const float inv = 1.0f / sum;
  MapUnary(x, x, n, [inv](DF dd, VF v) { return hn::Mul(v, hn::Set(dd, inv)); });
}

float LogSumExpImpl(const float* x, int64_t n) {
  const size_t un = static_cast<size_t>(n);
  if (un == 0) return kNegInf;
  const float mx = MaxRow(x, un);
  if (mx == kNegInf) return kNegInf;
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vmx = hn::Set(d, mx);
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= un; i += 2 * N) {
    s0 = hn::Add(s0, hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vmx)));
    s1 = hn::Add(s1, hn::Exp(d, hn::Sub(hn::LoadU(d, x + i + N), vmx)));
  }
  for (; i + N <= un; i += N) s0 = hn::Add(s0, hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), vmx)));
  if (i < un) s1 = hn::Add(s1, hn::Exp(d, hn::Sub(LoadTail(d, x + i, un - i, kNegInf), vmx)));
  const float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));  // >= 1: max gives exp(0)
  return mx + std::log(sum);
}

void SiluImpl(const float* x, float* out, int64_t n) {
  MapUnary(x, out, n, [](DF d, VF v) { return hn::Mul(v, Sigmoid(d, v)); });
}

void SwiGluImpl(const float* gate, const float* up, float* out, int64_t n) {
  MapBinary(gate, up, out, n,
            [](DF d, VF g, VF u) { return hn::Mul(hn::Mul(g, Sigmoid(d, g)), u); });
}

// 0.5·x·(1 + tanh(u)) == x·sigmoid(2u), u = sqrt(2/π)·x·(1 + 0.044715·x²).
inline VF GeluTanh(DF d, VF v) {
  const VF k2 = hn::Set(d, 2.0f * 0.7978845608028654f);
  const VF inner = hn::MulAdd(hn::Mul(v, v), hn::Set(d, 0.044715f), hn::Set(d, 1.0f));
  return hn::Mul(v, Sigmoid(d, hn::Mul(hn::Mul(v, k2), inner)));
}

void GeluImpl(const float* x, float* out, int64_t n) {
  MapUnary(x, out, n, [](DF d, VF v) { return GeluTanh(d, v); });
}

void GeGluImpl(const float* gate, const float* up, float* out, int64_t n) {
  MapBinary(gate, up, out, n, [](DF d, VF g, VF u) { return hn::Mul(GeluTanh(d, g), u); });
}

void SoftCapImpl(const float* x, float cap, float* out, int64_t n) {
  MapUnary(x, out, n, [cap](DF d, VF v) {
    return hn::Mul(hn::Tanh(d, hn::Mul(v, hn::Set(d, 1.0f / cap))), hn::Set(d, cap));
  });
}

void AddImpl(const float* a, const float* b, float* out, int64_t n) {
  MapBinary(a, b, out, n, [](DF, VF u, VF v) { return hn::Add(u, v); });
}
void MulImpl(const float* a, const float* b, float* out, int64_t n) {
  MapBinary(a, b, out, n, [](DF, VF u, VF v) { return hn::Mul(u, v); });
}
void ScaleImpl(const float* x, float s, float* out, int64_t n) {
  MapUnary(x, out, n, [s](DF d, VF v) { return hn::Mul(hn::Set(d, s), v); });
}
void AxpyImpl(float a, const float* x, float* y, int64_t n) {
  MapBinary(x, y, y, n, [a](DF d, VF xv, VF yv) { return hn::MulAdd(hn::Set(d, a), xv, yv); });
}

float DotImpl(const float* a, const float* b, int64_t n) {
  return Reduce2(a, b, n, [](DF, VF u, VF v, VF acc) { return hn::MulAdd(u, v, acc); });
}
float SumImpl(const float* x, int64_t n) {
  // b = x is loaded but unused; the compiler drops the duplicate load.
  return Reduce2(x, x, n, [](DF, VF u, VF, VF acc) { return hn::Add(u, acc); });
}
float StreamSumImpl(const float* x, int64_t n) {
  // As matvec.cc's kernels: a hint per cache line 3 KiB ahead, into L2.
  constexpr int64_t kAheadFloats = 3072 / 4;
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t step = std::max<int64_t>(4 * N, 16);  // at least a cache line per iteration
  VF s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  int64_t i = 0;
  for (; i + step <= n; i += step) {
    for (int64_t c = 0; c < step; c += 16) __builtin_prefetch(x + i + kAheadFloats + c, 0, 2);
    for (int64_t j = 0; j < step; j += 4 * N) {
      s0 = hn::Add(s0, hn::LoadU(d, x + i + j));
      s1 = hn::Add(s1, hn::LoadU(d, x + i + j + N));
      s2 = hn::Add(s2, hn::LoadU(d, x + i + j + 2 * N));
      s3 = hn::Add(s3, hn::LoadU(d, x + i + j + 3 * N));
    }
  }
  const VF s = hn::Add(hn::Add(s0, s1), hn::Add(s2, s3));
  return hn::GetLane(hn::SumOfLanes(d, s)) + SumImpl(x + i, n - i);
}
float MaxImpl(const float* x, int64_t n) { return MaxRow(x, static_cast<size_t>(n)); }

// Two passes (max, then first lane equal to it): the second usually stops early and keeps the
// first pass a plain Max chain instead of tracking indices per lane.
int64_t ArgMaxImpl(const float* x, int64_t n) {
  const size_t un = static_cast<size_t>(n);
  const float mx = MaxRow(x, un);
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF vm = hn::Set(d, mx);
  size_t i = 0;
  for (; i + N <= un; i += N) {
    const intptr_t j = hn::FindFirstTrue(d, hn::Eq(hn::LoadU(d, x + i), vm));
    if (j >= 0) return static_cast<int64_t>(i) + j;
  }
  for (; i < un; ++i) {
    if (x[i] == mx) return static_cast<int64_t>(i);
  }
  return 0;  // only reachable with NaN input (precondition violated)
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace tarmac::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tarmac::kernels {

HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(SoftmaxImpl);
HWY_EXPORT(LogSumExpImpl);
HWY_EXPORT(SiluImpl);
HWY_EXPORT(SwiGluImpl);
HWY_EXPORT(GeluImpl);
HWY_EXPORT(GeGluImpl);
HWY_EXPORT(SoftCapImpl);
HWY_EXPORT(AddImpl);
HWY_EXPORT(MulImpl);
HWY_EXPORT(ScaleImpl);
HWY_EXPORT(AxpyImpl);
HWY_EXPORT(DotImpl);
HWY_EXPORT(SumImpl);
HWY_EXPORT(StreamSumImpl);
HWY_EXPORT(MaxImpl);
HWY_EXPORT(ArgMaxImpl);

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  TARMAC_DCHECK(n >= 1 && eps >= 0.0f);
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, weight, n, eps, out);
}
void Softmax(float* x, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(SoftmaxImpl)(x, n, 1.0f);
}
void SoftmaxScaled(float* x, int64_t n, float scale) {
  TARMAC_DCHECK(n >= 0 && scale > 0.0f);
  HWY_DYNAMIC_DISPATCH(SoftmaxImpl)(x, n, scale);
}
float LogSumExp(const float* x, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  return HWY_DYNAMIC_DISPATCH(LogSumExpImpl)(x, n);
}
void Silu(const float* x, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(SiluImpl)(x, out, n);
}
void SwiGlu(const float* gate, const float* up, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(SwiGluImpl)(gate, up, out, n);
}
void Gelu(const float* x, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(GeluImpl)(x, out, n);
}
void GeGlu(const float* gate, const float* up, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(GeGluImpl)(gate, up, out, n);
}
void SwiGluOai(const float* gate, const float* up, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kLimit);
    const float u = std::clamp(up[i], -kLimit, kLimit);
    out[i] = g / (1.0f + std::exp(-kAlpha * g)) * (u + 1.0f);
  }
}
void ApplyGlu(GluKind kind, const float* gate, const float* up, float* out, int64_t n) {
  if (kind == GluKind::kGeGlu) return GeGlu(gate, up, out, n);
  if (kind == GluKind::kSwiGluOai) return SwiGluOai(gate, up, out, n);
  SwiGlu(gate, up, out, n);
}
void SoftCap(const float* x, float cap, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0 && cap > 0.0f);
  HWY_DYNAMIC_DISPATCH(SoftCapImpl)(x, cap, out, n);
}
void Add(const float* a, const float* b, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(AddImpl)(a, b, out, n);
}
void Mul(const float* a, const float* b, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(MulImpl)(a, b, out, n);
}
void Scale(const float* x, float s, float* out, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(ScaleImpl)(x, s, out, n);
}
void Axpy(float a, const float* x, float* y, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  HWY_DYNAMIC_DISPATCH(AxpyImpl)(a, x, y, n);
}
float DotF32(const float* a, const float* b, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  return HWY_DYNAMIC_DISPATCH(DotImpl)(a, b, n);
}
float SumF32(const float* x, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  return HWY_DYNAMIC_DISPATCH(SumImpl)(x, n);
}
float StreamSumF32(const float* x, int64_t n) {
  TARMAC_DCHECK(n >= 0);
  return HWY_DYNAMIC_DISPATCH(StreamSumImpl)(x, n);
}
float MaxF32(const float* x, int64_t n) {
  TARMAC_CHECK(n >= 1);
  return HWY_DYNAMIC_DISPATCH(MaxImpl)(x, n);
}
int64_t ArgMax(const float* x, int64_t n) {
  TARMAC_CHECK(n >= 1);
  return HWY_DYNAMIC_DISPATCH(ArgMaxImpl)(x, n);
}

}  // namespace tarmac::kernels
#endif  // HWY_ONCE
