// Scalar references for the kernels in kernels/ops.h: plain loops, accumulating and evaluating
// transcendental functions in double, rounding once to f32. Slow on purpose; tests compare the
// SIMD kernels against these. Same shapes, preconditions and aliasing rules as ops.h.
// (RoPE has no separate reference: RopeNorm/RopeNeox in ops.h are scalar double already.)
#pragma once

#include <cstdint>

namespace tarmac::kernels::ref {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
void Softmax(float* x, int64_t n);
void SoftmaxScaled(float* x, int64_t n, float scale);
double LogSumExp(const float* x, int64_t n);
void Silu(const float* x, float* out, int64_t n);
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);
void Gelu(const float* x, float* out, int64_t n);
void GeGlu(const float* gate, const float* up, float* out, int64_t n);
void SwiGluOai(const float* gate, const float* up, float* out, int64_t n);
void SoftCap(const float* x, float cap, float* out, int64_t n);
void Add(const float* a, const float* b, float* out, int64_t n);
void Mul(const float* a, const float* b, float* out, int64_t n);
void Scale(const float* x, float s, float* out, int64_t n);
void Axpy(float a, const float* x, float* y, int64_t n);
// Reductions return the double-precision result (not rounded to f32) so tests can measure the
// f32 kernels' accumulation error.
double Dot(const float* a, const float* b, int64_t n);
double Sum(const float* x, int64_t n);
float Max(const float* x, int64_t n);
int64_t ArgMax(const float* x, int64_t n);
void ConvertF16ToF32(const uint16_t* in, float* out, int64_t n);
void ConvertF32ToF16(const float* in, uint16_t* out, int64_t n);
void ConvertBF16ToF32(const uint16_t* in, float* out, int64_t n);
void ConvertF32ToBF16(const float* in, uint16_t* out, int64_t n);

}  // namespace tarmac::kernels::ref
