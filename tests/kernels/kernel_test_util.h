// Test helpers for the dot/matvec/matmul kernels: random weight rows of every compute dtype
// built directly from random blocks (every quant bit pattern, random sane f16 scales), and
// random activations spanning several orders of magnitude. Not thread-safe (takes an rng).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "hwy/targets.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_int8.h"
#include "tensor/view.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_ref.h"

namespace tarmac::kernels::testing {

// Runs fn() once per ISA level (cpu_features.h) this CPU supports, up to the active one,
// forcing every kernel choice to it (ScopedIsa); restores the override afterwards. fn receives
// the level's name for messages. Every path the dispatch table has on this machine runs.
template <class Fn>
void ForEachIsa(const Fn& fn) {
  const Isa top = ActiveIsa();
  for (Isa isa : kAllIsas) {
    if (isa > top) break;
    const ScopedIsa forced(isa);
    fn(IsaName(isa));
  }
}

// The same over levels with distinct Highway targets only (the active level, avx2, scalar):
// for the portable kernels, which see only the Highway target.
template <class Fn>
void ForEachTarget(const Fn& fn) {
  const Isa top = ActiveIsa();
  const Isa levels[3] = {top, std::min(top, Isa::kAvx2), Isa::kScalar};
  for (int i = 0; i < 3; ++i) {
    if (i > 0 && levels[i] == levels[i - 1]) continue;
    const ScopedIsa forced(levels[i]);
    fn(IsaName(levels[i]));
  }
}

// Turns the AMX paths on (the amx level, where the CPU has it) or off (at most avx512) for
// one scope; restores the override after.
struct AmxSwitch {
  explicit AmxSwitch(bool on) : forced(on ? Isa::kAmx : std::min(ActiveIsa(), Isa::kAvx512)) {}
  const ScopedIsa forced;
};

inline const DType kMatVecTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                     DType::kQ4_0, DType::kQ4_K, DType::kQ6_K};
// The other compute types: MatVecBlocks and the decoded-row paths (dequant_blocks, and
// MatVec's f32 dot of the reference decode where AVX2 is absent) compute them.
inline const DType kDequantizedTypes[] = {
    DType::kQ4_1,  DType::kQ5_0,  DType::kQ5_1,  DType::kQ2_K,   DType::kQ3_K,
    DType::kQ5_K,  DType::kIQ4_NL, DType::kIQ4_XS, DType::kMXFP4, DType::kTQ1_0,
    DType::kTQ2_0, DType::kIQ2_XXS, DType::kIQ2_XS, DType::kIQ2_S, DType::kIQ3_XXS,
    DType::kIQ3_S, DType::kIQ1_S,  DType::kIQ1_M};

// A random half in +-[lo, hi), rounded to f16.
inline uint16_t RandomHalf(std::mt19937& rng, float lo, float hi, bool allow_negative) {
  std::uniform_real_distribution<float> u(lo, hi);
  float v = u(rng);
  if (allow_negative && (rng() & 1)) v = -v;
  return F32ToF16(v);
}

// Fills one row of n elements of `type` at dst (RowBytes(type, n) bytes).
inline void FillRandomRow(DType type, int64_t n, std::mt19937& rng, uint8_t* dst) {
  const int64_t bytes = RowBytes(type, n);
  for (int64_t i = 0; i < bytes; ++i) dst[i] = static_cast<uint8_t>(rng());
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t nb = n / Traits(type).block_size;
  switch (type) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        const float v = nd(rng);
        std::memcpy(dst + 4 * i, &v, 4);
      }
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToF16(nd(rng));
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = F32ToBF16(nd(rng));
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case DType::kQ8_0: {
      auto* b = reinterpret_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < nb; ++i) b[i].d = RandomHalf(rng, 1e-3f, 2e-2f, true);
      break;
    }
    case DType::kQ4_0: {
      auto* b = reinterpret_cast<BlockQ4_0*>(dst);
      for (int64_t i = 0; i < nb; ++i) b[i].d = RandomHalf(rng, 1e-3f, 0.3f, true);
      break;
    }
    case DType::kQ4_K: {
      auto* b = reinterpret_cast<BlockQ4_K*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = RandomHalf(rng, 1e-4f, 5e-3f, false);
        b[i].dmin = RandomHalf(rng, 1e-4f, 5e-3f, false);
      }
      break;
    }
    case DType::kQ6_K: {
      auto* b = reinterpret_cast<BlockQ6_K*>(dst);
      for (int64_t i = 0; i < nb; ++i) b[i].d = RandomHalf(rng, 1e-5f, 1e-3f, true);
      break;
    }
    case DType::kQ8_K: {
      auto* b = reinterpret_cast<BlockQ8_K*>(dst);
      std::uniform_real_distribution<float> u(1e-3f, 1.0f);
      for (int64_t i = 0; i < nb; ++i) b[i].d = u(rng);
      break;
    }
    default: {
      // The other block types: random bytes may hold NaN scales, so rows are made of random
      // blocks from a pool of 64 quantized once per type (quantizing every row is slow).
      static std::map<DType, std::vector<uint8_t>> pools;
      const int64_t bs = Traits(type).block_size, bb = Traits(type).type_size;
      std::vector<uint8_t>& pool = pools[type];
      if (pool.empty()) {
        std::vector<float> v(64 * bs);
        for (float& e : v) e = 0.02f * nd(rng);
        pool.resize(RowBytes(type, 64 * bs));
        TARMAC_CHECK(QuantizeRowRef(type, v.data(), pool.data(), 64 * bs).ok());
      }
      for (int64_t i = 0; i < nb; ++i) std::memcpy(dst + i * bb, pool.data() + (rng() % 64) * bb, bb);
      break;
    }
  }
}

// rows × n matrix with the given row stride (bytes, >= RowBytes); padding bytes are random.
inline std::vector<uint8_t> RandomMatrix(DType type, int64_t rows, int64_t n, int64_t stride,
                                         std::mt19937& rng) {
  std::vector<uint8_t> m(rows * stride + 64);
  for (auto& v : m) v = static_cast<uint8_t>(rng());
  for (int64_t r = 0; r < rows; ++r) FillRandomRow(type, n, rng, m.data() + r * stride);
  return m;
}

// S = sum_k |w_k| · |d_b q_k| for row r of w against x quantized as the int8 kernels do
// (QuantizeActivationsQ8Ref): the magnitude their f32 summation-order bounds scale with.
inline double Int8ActivationMagnitude(const MatrixView& w, int64_t r, const float* x) {
  const int64_t K = w.cols;
  std::vector<int8_t> q(K);
  std::vector<float> d(K / 32), wf(K);
  QuantizeActivationsQ8Ref(x, K, q.data(), d.data());
  DequantizeRowRef(w.type, w.row(r), wf.data(), K);
  double s = 0;
  for (int64_t k = 0; k < K; ++k) s += std::fabs(wf[k]) * std::fabs(d[k / 32] * q[k]);
  return s;
}

// A copy of bytes that ends exactly where readable memory ends (a PROT_NONE page follows):
// a kernel that reads past the last byte faults. Owns the mapping; unmaps on destruction.
class GuardedCopy {
 public:
  explicit GuardedCopy(const std::vector<uint8_t>& src, int64_t bytes) {
    const int64_t page = sysconf(_SC_PAGESIZE);
    len_ = ((bytes + page - 1) / page + 1) * page;
    mem_ = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem_ == MAP_FAILED) return;
    uint8_t* guard = static_cast<uint8_t*>(mem_) + len_ - page;
    if (mprotect(guard, page, PROT_NONE) != 0) return;
    data_ = guard - bytes;
    std::memcpy(data_, src.data(), bytes);
  }
  ~GuardedCopy() {
    if (mem_ != MAP_FAILED) munmap(mem_, len_);
  }
  GuardedCopy(const GuardedCopy&) = delete;
  GuardedCopy& operator=(const GuardedCopy&) = delete;
  // nullptr when the mapping failed.
  uint8_t* data() const { return data_; }

 private:
  void* mem_ = MAP_FAILED;
  int64_t len_ = 0;
  uint8_t* data_ = nullptr;
};

// Activations: normal values times 10^U(-2, 2), so magnitudes span four decades.
inline std::vector<float> RandomActivations(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> e(-2.0f, 2.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng) * std::pow(10.0f, e(rng));
  return x;
}

// Column counts for a type: single and few blocks, odd block counts, and a long row.
inline std::vector<int64_t> TestCols(DType type) {
  const int64_t bs = Traits(type).block_size;
  if (bs == 1) return {1, 2, 7, 16, 33, 255, 257, 600, 4096 + 1};
  if (bs == 32) return {32, 64, 96, 224, 288, 800, 4096 + 32};
  return {256, 512, 768, 1280, 4096 + 256};
}

// Error bound of MatVec/Dot against the double reference for one row (see matvec_test.cc for
// the derivation): f32 accumulation (1e-4 relative to sum |w x|) plus, for quantized weight
// types, the int16 activation quantization (half a step of max_b|x|/32767 per element).
// w: the row dequantized with DequantizeRowRef; n elements.
inline double MatVecTolerance(DType type, const float* w, const float* x, int64_t n) {
  double abs_dot = 0, quant = 0;
  for (int64_t k = 0; k < n; ++k) abs_dot += std::fabs(static_cast<double>(w[k]) * x[k]);
  const bool quantized = type == DType::kQ8_0 || type == DType::kQ4_0 || type == DType::kQ4_K ||
                         type == DType::kQ6_K;
  if (quantized) {
    for (int64_t b = 0; b < n / 32; ++b) {
      double amax = 0, wsum = 0;
      for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
        amax = std::max(amax, static_cast<double>(std::fabs(x[k])));
        wsum += std::fabs(w[k]);
      }
      quant += amax / 65534.0 * wsum;
    }
  }
  return 1e-4 * abs_dot + 1.05 * quant + 1e-30;
}

}  // namespace tarmac::kernels::testing
