// One decoded unit of any MatVecBlocks type (DecodeUnit), and the one table from a DType to
// its decoder's template instance (WithBlocksType), shared by MatVecBlocks and
// DequantizeBlocksRow. Internal to the kernels module; include only from a .cc that calls
// these in functions compiled for AVX2.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/block_decode_avx2-inl.h"
#include "kernels/block_decode_grid_avx2-inl.h"

namespace tarmac::kernels::blocks_internal {
inline constexpr int64_t kUnit = 256;  // weights per decoded unit
inline constexpr int64_t kQB = 32;     // weights per chunk
}  // namespace tarmac::kernels::blocks_internal

#if defined(TARMAC_BLOCKS_TARGET_AVX2)

namespace tarmac::kernels::blocks_internal {

// Decodes unit u (weights 256u ..) of a row of type kT of `cols` weights.
template <DType kT>
TARMAC_BLOCKS_TARGET_AVX2 __attribute__((always_inline)) inline void DecodeUnit(
    const uint8_t* row, int64_t u, int64_t cols, Unit* out) {
  if constexpr (kT == DType::kQ5_K) {
    DecodeQ5K(reinterpret_cast<const BlockQ5_K*>(row)[u], out);
  } else if constexpr (kT == DType::kQ3_K) {
    DecodeQ3K(reinterpret_cast<const BlockQ3_K*>(row)[u], out);
  } else if constexpr (kT == DType::kQ2_K) {
    DecodeQ2K(reinterpret_cast<const BlockQ2_K*>(row)[u], out);
  } else if constexpr (kT == DType::kIQ4_XS) {
    DecodeIQ4XS(reinterpret_cast<const BlockIQ4_XS*>(row)[u], out);
  } else if constexpr (kT == DType::kTQ2_0) {
    DecodeTQ2(reinterpret_cast<const BlockTQ2_0*>(row)[u], out);
  } else if constexpr (kT == DType::kTQ1_0) {
    DecodeTQ1(reinterpret_cast<const BlockTQ1_0*>(row)[u], out);
  } else if constexpr (kT == DType::kIQ2_XXS) {
    DecodeIQ2XXS(reinterpret_cast<const quant_grid::BlockIQ2_XXS*>(row)[u], out);
  } else if constexpr (kT == DType::kIQ2_XS) {
    DecodeIQ2XS(reinterpret_cast<const quant_grid::BlockIQ2_XS*>(row)[u], out);
  } else if constexpr (kT == DType::kIQ2_S) {
    DecodeIQ2S(reinterpret_cast<const quant_grid::BlockIQ2_S*>(row)[u], out);
  } else if constexpr (kT == DType::kIQ3_XXS) {
    DecodeIQ3XXS(reinterpret_cast<const quant_grid::BlockIQ3_XXS*>(row)[u], out);
  } else if constexpr (kT == DType::kIQ3_S) {
    DecodeIQ3S(reinterpret_cast<const quant_grid::BlockIQ3_S*>(row)[u], out);
  } else if constexpr (kT == DType::kIQ1_S) {
    DecodeIQ1S(reinterpret_cast<const quant_grid::BlockIQ1_S*>(row)[u], out);
  } else if constexpr (kT == DType::kIQ1_M) {
    DecodeIQ1M(reinterpret_cast<const quant_grid::BlockIQ1_M*>(row)[u], out);
  } else {
    const int64_t i0 = u * (kUnit / kQB);
    const int n = static_cast<int>(std::min<int64_t>(kUnit / kQB, cols / kQB - i0));
    DecodeSmall<kT>(row, i0, n, out);
  }
}

// The K types with integer sub-block scales (Q2_K, Q3_K, Q5_K, IQ4_XS): their integer form.
template <DType kT>
constexpr bool kKInts = kT == DType::kQ2_K || kT == DType::kQ3_K || kT == DType::kQ5_K ||
                        kT == DType::kIQ4_XS;

// Super-block i of a row of a kKInts type: weights into w[0..8), scales returned.
template <DType kT>
TARMAC_BLOCKS_TARGET_AVX2 __attribute__((always_inline)) inline KScales DecodeKInts(
    const uint8_t* row, int64_t i, __m256i* w) {
  static_assert(kKInts<kT>);
  if constexpr (kT == DType::kQ5_K) return Q5KInts(reinterpret_cast<const BlockQ5_K*>(row)[i], w);
  if constexpr (kT == DType::kQ3_K) return Q3KInts(reinterpret_cast<const BlockQ3_K*>(row)[i], w);
  if constexpr (kT == DType::kQ2_K) return Q2KInts(reinterpret_cast<const BlockQ2_K*>(row)[i], w);
  if constexpr (kT == DType::kIQ4_XS) return IQ4XSInts(reinterpret_cast<const BlockIQ4_XS*>(row)[i], w);
}

// f(std::integral_constant<DType, T>{}) for the MatVecBlocks type t; false (f not called) for
// any other type.
template <class F>
bool WithBlocksType(DType t, F&& f) {
  switch (t) {
#define TARMAC_BLOCKS_CASE(T) \
  case DType::T: f(std::integral_constant<DType, DType::T>{}); return true;
    TARMAC_BLOCKS_CASE(kQ2_K) TARMAC_BLOCKS_CASE(kQ3_K) TARMAC_BLOCKS_CASE(kQ5_K)
    TARMAC_BLOCKS_CASE(kIQ4_XS) TARMAC_BLOCKS_CASE(kIQ4_NL) TARMAC_BLOCKS_CASE(kMXFP4)
    TARMAC_BLOCKS_CASE(kQ4_1) TARMAC_BLOCKS_CASE(kQ5_0) TARMAC_BLOCKS_CASE(kQ5_1)
    TARMAC_BLOCKS_CASE(kTQ1_0) TARMAC_BLOCKS_CASE(kTQ2_0) TARMAC_BLOCKS_CASE(kIQ2_XXS)
    TARMAC_BLOCKS_CASE(kIQ2_XS) TARMAC_BLOCKS_CASE(kIQ2_S) TARMAC_BLOCKS_CASE(kIQ3_XXS)
    TARMAC_BLOCKS_CASE(kIQ3_S) TARMAC_BLOCKS_CASE(kIQ1_S) TARMAC_BLOCKS_CASE(kIQ1_M)
#undef TARMAC_BLOCKS_CASE
    default: return false;
  }
}

}  // namespace tarmac::kernels::blocks_internal
#endif
