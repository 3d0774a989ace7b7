// Row-wise float kernels used inside a forward pass: normalisation, softmax, activations,
// elementwise arithmetic, reductions, F16/BF16 row conversion and rotary position embedding.
//
// Every kernel works on raw float rows (one token row at a time), is single-threaded, never
// allocates, and dispatches at run time to the best SIMD target Highway compiled for (AVX2,
// AVX-512, ...). A scalar reference for each lives in kernels/ops_ref.h; tests compare the two.
//
// Common rules:
// - n >= 0 is an element count; n == 0 is a no-op unless the op says otherwise.
// - "out may alias x" means out == x exactly (in place); partial overlap is never allowed.
// - Inputs must not contain NaN unless an op says how NaN is handled.
#pragma once

#include <cstdint>
#include <vector>

namespace tarmac::kernels {

// ---------------------------------------------------------------- normalisation
// out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i].
// x, weight, out: [n] f32. out may alias x. Preconditions: n >= 1, eps >= 0.
// The sum of squares accumulates in f32 over several vector accumulators, so |x| must stay
// well below ~1e18 (x² overflows f32 beyond that); activations are many orders smaller.
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// ---------------------------------------------------------------- softmax
// In place: x[i] = exp(x[i] - max) / sum_j exp(x[j] - max).
// x: [n] f32. -inf entries (masked positions) become exactly 0. A row whose entries are all
// -inf has no defined distribution; it becomes all zeros (not NaN) so a fully masked row
// contributes nothing. Preconditions: no NaN, no +inf.
void Softmax(float* x, int64_t n);
// Softmax(x · scale) in place, without a separate scaling pass (attention uses
// scale = 1/sqrt(head_dim)). Preconditions: scale > 0 (and finite), plus those of Softmax.
void SoftmaxScaled(float* x, int64_t n, float scale);
// log(sum_i exp(x[i])), computed as max + log(sum_i exp(x[i] - max)); x unchanged. -inf
// entries add nothing; all -inf (or n == 0) gives -inf. Preconditions: no NaN, no +inf.
// (Samplers use it for the chosen token's logprob over the whole vocabulary.)
float LogSumExp(const float* x, int64_t n);

// ---------------------------------------------------------------- activations
// out = x · sigmoid(x). x, out: [n] f32; out may alias x.
void Silu(const float* x, float* out, int64_t n);
// out = silu(gate) · up (the SwiGLU feed-forward gate). gate, up, out: [n] f32; out may alias
// gate or up.
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);
// GELU, tanh approximation as GGML defines it:
// 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), computed as x·sigmoid(2·inner): the same
// function, without the cancellation of 1 + tanh for large negative x. x, out: [n] f32; out may alias x.
void Gelu(const float* x, float* out, int64_t n);
// out = gelu(gate) · up with Gelu's tanh approximation (the GeGLU feed-forward gate of Gemma).
// gate, up, out: [n] f32; out may alias gate or up.
void GeGlu(const float* gate, const float* up, float* out, int64_t n);
// gpt-oss's clamped SwiGLU: g = min(gate, 7), u = clamp(up, -7, 7),
// out = g · sigmoid(1.702 g) · (u + 1) (llama.cpp's swiglu_oai, exp in f32 as it computes).
// Same aliasing as SwiGlu.
void SwiGluOai(const float* gate, const float* up, float* out, int64_t n);
// A feed-forward block's gated activation: SwiGlu, GeGlu or SwiGluOai.
enum class GluKind { kSwiGlu, kGeGlu, kSwiGluOai };
// out = SwiGlu / GeGlu / SwiGluOai(gate, up) as kind says; elementwise, so any split of
// [0, n) gives the same values. Same aliasing as those.
void ApplyGlu(GluKind kind, const float* gate, const float* up, float* out, int64_t n);

// out = cap · tanh(x / cap): soft-capping of logits (Gemma 2's final logits). x, out: [n] f32;
// out may alias x. Preconditions: cap > 0 (and finite).
void SoftCap(const float* x, float cap, float* out, int64_t n);

// ---------------------------------------------------------------- elementwise
// a, b, x, y, out: [n] f32. out may alias any input.
void Add(const float* a, const float* b, float* out, int64_t n);  // out = a + b
void Mul(const float* a, const float* b, float* out, int64_t n);  // out = a · b
void Scale(const float* x, float s, float* out, int64_t n);       // out = s · x
void Axpy(float a, const float* x, float* y, int64_t n);          // y += a · x
// (Axpy rounds once where the target has FMA, AVX2 and up, else twice.)

// ---------------------------------------------------------------- reductions
// Accumulate in f32 over several vector accumulators, so the error stays far below a serial
// sum's n·ε (tests measure ≤ 4e-6·Σ|terms| at n = 4097).
float DotF32(const float* a, const float* b, int64_t n);  // Σ a[i]·b[i]; 0 for n == 0
float SumF32(const float* x, int64_t n);                  // Σ x[i]; 0 for n == 0
// SumF32 read the way the weight-streaming (decode) kernels read memory: with software
// prefetch a few KiB ahead, which keeps more misses in flight than the hardware prefetcher
// alone. The read-bandwidth probe that decode speed is held to uses it.
float StreamSumF32(const float* x, int64_t n);
// Largest element. Preconditions: n >= 1.
float MaxF32(const float* x, int64_t n);
// Index of the first element equal to the maximum (greedy sampling picks it; ties go to the
// lower token id, as a scalar loop with '>' would). Preconditions: n >= 1, no NaN.
int64_t ArgMax(const float* x, int64_t n);

// ---------------------------------------------------------------- dtype conversion
// Rows of IEEE binary16 / bfloat16 bit patterns <-> f32, bit-exact against the scalar
// conversions in tensor/fp16.h: round to nearest even, overflow to ±inf, subnormals kept,
// NaN stays NaN (F32->F16 gives the canonical quiet NaN sign|0x7e00, F32->BF16 quiets by
// setting bit 6 and keeps the payload; F16/BF16->F32 keep the payload). F16 uses the F16C
// instructions where the target has them and integer SIMD elsewhere (and for NaN), so every
// target gives the same bits.
// in, out: [n]; in and out must not overlap.
void ConvertF16ToF32(const uint16_t* in, float* out, int64_t n);
void ConvertF32ToF16(const float* in, uint16_t* out, int64_t n);
void ConvertBF16ToF32(const uint16_t* in, float* out, int64_t n);
void ConvertF32ToBF16(const float* in, uint16_t* out, int64_t n);

// ---------------------------------------------------------------- rotary position embedding
// Both conventions as llama.cpp defines them. For pair i in [0, n_rot/2):
//   theta_i = pos · freq_scale · freq_base^(-2i/n_rot) / freq_factors[i]   (radians)
//   (a, b) <- (a·cos θ − b·sin θ, a·sin θ + b·cos θ)
// kNorm (LLAMA_ROPE_TYPE_NORM, arch `llama`): the pair is (x[2i], x[2i+1]).
// kNeox (LLAMA_ROPE_TYPE_NEOX, `qwen2`, ...): the pair is (x[i], x[i + n_rot/2]).
// Dims n_rot..head_dim-1 of each head are left unchanged (partial rotary).
// freq_factors: [n_rot/2] divisors of each pair's frequency (llama-3 `rope_freqs.weight`,
// Phi-3's LongRoPE `rope_factors_long/short`), or nullptr for all 1.
// mscale: multiplies the rotated dims (cos and sin), 1 but for rope scaling with an attention
// factor (Phi-3 LongRoPE's `rope.scaling.attn_factor`, as ggml's rope applies it); the
// unrotated dims are left as they are.
// Precision: angles and their cos/sin are computed in double and rounded once to f32, so
// they stay accurate at any position (a float pos·theta is already ~0.01 rad off at 128k).
enum class RopeType { kNorm, kNeox };

// Uncached: computes cos/sin for every pair on each call (n_rot/2 sincos in double per token).
// This is the reference semantics; use RopeCache in hot paths.
// x: [n_heads][head_dim] f32, rotated in place. Preconditions: n_heads >= 0, n_rot even,
// 0 <= n_rot <= head_dim, pos >= 0, freq_base > 0.
void RopeNorm(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
              float freq_base, float freq_scale, const float* freq_factors, float mscale = 1.0f);
void RopeNeox(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
              float freq_base, float freq_scale, const float* freq_factors, float mscale = 1.0f);

// YaRN (rope.scaling.type yarn), as ggml's rope_yarn: pair i's angle blends the interpolated
// angle (freq_scale · θ_i) and the extrapolated one (θ_i) by ramp(i) · ext_factor, ramp(i) =
// 1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1), and cos/sin are scaled by
// 1 + 0.1 · ln(1 / freq_scale) on top of mscale. ext_factor 0: plain linear scaling.
struct RopeYarn {
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;  // YarnCorrDims
};
// ggml_rope_yarn_corr_dims: the pair indices where the rotations of beta_fast and beta_slow
// turns over the original context fall, floored / ceiled and clamped to [0, n_rot - 1].
RopeYarn MakeRopeYarn(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                      float beta_slow, float ext_factor = 1.0f);

// cos/sin of every (position, pair) for one model, built once (the model's rope parameters are
// fixed), then applied with SIMD per token. Memory: max_positions · n_rot · 4 bytes, e.g.
// 64 MiB for 128k positions × n_rot 128, so size max_positions to the context actually served.
// Immutable after construction; Apply is thread-safe.
class RopeCache {
 public:
  RopeCache() = default;
  // freq_factors: [n_rot/2] or nullptr; read only here, not kept. Preconditions: max_positions >=
  // 1, mscale > 0, plus those of RopeNorm.
  RopeCache(RopeType type, int64_t n_rot, int64_t max_positions, float freq_base, float freq_scale,
            const float* freq_factors, float mscale = 1.0f, const RopeYarn& yarn = {});

  // Same result as RopeNorm/RopeNeox(x, ..., pos, <the cache's parameters>) up to f32
  // rounding of the rotation (those have no YaRN). x: [n_heads][head_dim] f32 in place.
  // Preconditions: 0 <= pos < max_positions(), n_rot() <= head_dim.
  void Apply(float* x, int64_t n_heads, int64_t head_dim, int64_t pos) const;

  RopeType type() const { return type_; }
  int64_t n_rot() const { return n_rot_; }
  int64_t max_positions() const { return max_positions_; }

 private:
  RopeType type_ = RopeType::kNorm;
  int64_t n_rot_ = 0;
  int64_t max_positions_ = 0;
  // [max_positions][n_rot] f32, a row per position laid out like the pairs it rotates:
  // kNorm [c0,s0,c1,s1,...] (interleaved like x), kNeox [c0..c_{h-1}, s0..s_{h-1}] (h = n_rot/2).
  std::vector<float> table_;
};

}  // namespace tarmac::kernels
