// AVX2 decoding of the MatVecBlocks types to f32 (see dequant_blocks.h).

#include "kernels/dequant_blocks.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/block_decode_unit-inl.h"
#include "kernels/cpu_features.h"
#include "kernels/matvec_blocks.h"

namespace tarmac::kernels {
namespace {

#if defined(TARMAC_BLOCKS_TARGET_AVX2)
using blocks_internal::kQB;
using blocks_internal::kUnit;
using blocks_internal::Unit;

// The affine types: value = s · w + o (the others have o = 0 and skip the add, which would turn
// a -0 into +0).
template <DType kT>
constexpr bool kOffsets = kT == DType::kQ4_1 || kT == DType::kQ5_1 || kT == DType::kQ5_K ||
                          kT == DType::kQ2_K;

template <DType kT>
TARMAC_BLOCKS_TARGET_AVX2 void RowT(const uint8_t* src, float* dst, int64_t n) {
  const int64_t units = (n + kUnit - 1) / kUnit;
  for (int64_t u = 0; u < units; ++u) {
    Unit un;
    blocks_internal::DecodeUnit<kT>(src, u, n, &un);
    float* out = dst + u * kUnit;
    const int chunks = static_cast<int>(std::min<int64_t>(8, (n - u * kUnit) / kQB));
    alignas(32) int8_t w[kUnit];
    for (int c = 0; c < chunks; ++c) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(w + kQB * c), un.w[c]);
    }
    // s · w (+ o): the compiler vectorises this (and, ISO C++, never fuses it).
    for (int64_t e = 0; e < kQB * chunks; ++e) {
      float v = un.s[e / 16] * static_cast<float>(w[e]);
      if constexpr (kOffsets<kT>) v = v + un.o[e / 16];
      out[e] = v;
    }
  }
}
#endif

}  // namespace

bool DequantizeBlocksAvailable(DType type) {
  return MatVecBlocksAvailable() && MatVecBlocksSupports(type);
}

void DequantizeBlocksRow(DType type, const void* src, float* dst, int64_t n) {
  TARMAC_CHECK(DequantizeBlocksAvailable(type));
  TARMAC_CHECK(n >= 0 && n % Traits(type).block_size == 0);
#if defined(TARMAC_BLOCKS_TARGET_AVX2)
  const auto* s = static_cast<const uint8_t*>(src);
  blocks_internal::WithBlocksType(type, [&](auto kT) { RowT<decltype(kT)::value>(s, dst, n); });
#endif
}

}  // namespace tarmac::kernels
