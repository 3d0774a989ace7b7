// Random valid blocks of the grid types (see quant_grid_types.h, RandomGridBlocks).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/hash.h"
#include "tensor/fp16.h"
#include "tensor/quant_grid_blocks.h"
#include "tensor/quant_grid_types.h"
#include "tensor/quant_ref.h"

namespace tarmac::quant_grid {
namespace {

// Every byte pattern of a grid block is a valid encoding except its f16 scale d, which these
// two set: the first two bytes, or (IQ1_M) the top nibbles of its four scale words.
void SetScale(DType type, uint8_t* block, uint16_t h) {
  if (type != DType::kIQ1_M) {
    std::memcpy(block, &h, 2);
    return;
  }
  auto* b = reinterpret_cast<BlockIQ1_M*>(block);
  uint16_t sc[4];
  std::memcpy(sc, b->scales, 8);
  for (int k = 0; k < 4; ++k) {
    sc[k] = static_cast<uint16_t>((sc[k] & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
  }
  std::memcpy(b->scales, sc, 8);
}

}  // namespace

bool IsGridType(DType type) {
  switch (type) {
    case DType::kIQ2_XXS: case DType::kIQ2_XS: case DType::kIQ2_S: case DType::kIQ3_XXS:
    case DType::kIQ3_S: case DType::kIQ1_S: case DType::kIQ1_M:
      return true;
    default:
      return false;
  }
}

void RandomGridBlocks(DType type, uint64_t seed, float rms, void* dst, int64_t nb) {
  TARMAC_CHECK(IsGridType(type) && rms > 0.0f && nb >= 0);
  const int64_t bytes = Traits(type).type_size;
  auto* out = static_cast<uint8_t*>(dst);
  float v[kBlockSize];
  uint64_t state = seed;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* block = out + i * bytes;
    for (int64_t k = 0; k < bytes; k += 8) {
      state = SplitMix64(state);
      std::memcpy(block + k, &state, static_cast<size_t>(std::min<int64_t>(8, bytes - k)));
    }
    // Decode at d = 1, then scale d to the target RMS.
    SetScale(type, block, F32ToF16(1.0f));
    DequantizeRowRef(type, block, v, kBlockSize);
    double sum2 = 0;
    for (float e : v) sum2 += double(e) * e;
    const double unit_rms = std::sqrt(sum2 / kBlockSize);
    SetScale(type, block, F32ToF16(unit_rms > 0 ? static_cast<float>(rms / unit_rms) : 0.0f));
  }
}

}  // namespace tarmac::quant_grid
