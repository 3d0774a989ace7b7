#include "prefix/block_hash.h"

#include <bit>
#include <cstring>
#include <vector>

#include <xxhash.h>

#include "base/hash.h"

namespace tarmac::prefix {

uint64_t ChainedBlockHash(uint64_t parent_or_salt, std::span<const int32_t> tokens) {
  static_assert(std::endian::native == std::endian::little, "token bytes are hashed little-endian");
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_or_salt);
}

uint64_t NamespaceSalt(uint64_t ns) { return SplitMix64(ns ^ 0x7461726d61632d6bull); }

}  // namespace tarmac::prefix
