#include "kernels/ops_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "base/check.h"
#include "tensor/fp16.h"

namespace tarmac::kernels::ref {
namespace {

double SigmoidD(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void SoftmaxD(float* x, int64_t n, double scale) {
  if (n == 0) return;
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]) * scale);
  if (mx == -std::numeric_limits<double>::infinity()) {  // fully masked row: defined as zeros
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) * scale - mx);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(std::exp(static_cast<double>(x[i]) * scale - mx) / sum);
  }
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  TARMAC_CHECK(n >= 1);
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * inv * weight[i]);
}

void Softmax(float* x, int64_t n) { SoftmaxD(x, n, 1.0); }
void SoftmaxScaled(float* x, int64_t n, float scale) { SoftmaxD(x, n, scale); }

double LogSumExp(const float* x, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  if (mx == -std::numeric_limits<double>::infinity()) return mx;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - mx);
  return mx + std::log(sum);
}

void Silu(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * SigmoidD(x[i]));
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(gate[i] * SigmoidD(gate[i]) * up[i]);
  }
}

void Gelu(const float* x, float* out, int64_t n) {
  // 0.5·(1 + tanh(u)) == sigmoid(2u) exactly; the sigmoid form avoids the cancellation of
  // 1 + tanh(u) for u << 0, where even double would return 0 for a tiny negative result.
  const double k = std::sqrt(2.0 / std::numbers::pi);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    out[i] = static_cast<float>(v * SigmoidD(2.0 * k * (v + 0.044715 * v * v * v)));
  }
}

void GeGlu(const float* gate, const float* up, float* out, int64_t n) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  for (int64_t i = 0; i < n; ++i) {
    const double v = gate[i];
    out[i] = static_cast<float>(v * SigmoidD(2.0 * k * (v + 0.044715 * v * v * v)) * up[i]);
  }
}

void SwiGluOai(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = std::min(gate[i], 7.0f), u = std::clamp(up[i], -7.0f, 7.0f);
    out[i] = static_cast<float>(g * SigmoidD(1.702 * g) * (u + 1.0));
  }
}

void SoftCap(const float* x, float cap, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(cap * std::tanh(double{x[i]} / cap));
}

void Add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
void Mul(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}
void Scale(const float* x, float s, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = s * x[i];
}
void Axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

double Dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}
double Sum(const float* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}
float Max(const float* x, int64_t n) {
  TARMAC_CHECK(n >= 1);
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}
int64_t ArgMax(const float* x, int64_t n) {
  TARMAC_CHECK(n >= 1);
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

void ConvertF16ToF32(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(in[i]);
}
void ConvertF32ToF16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = F32ToF16(in[i]);
}
void ConvertBF16ToF32(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = BF16ToF32(in[i]);
}
void ConvertF32ToBF16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = F32ToBF16(in[i]);
}

}  // namespace tarmac::kernels::ref
