// Chained block hashes of the prefix cache: a cached block is named by the hash of its parent
// block's hash and its own token ids, so equal hashes mean equal whole prefixes. A namespace's
// first block folds the namespace salt in instead of a parent (no tenant's block hash can equal
// another tenant's for the same tokens). Deterministic across runs and machines: 64-bit XXH3 of
// the token ids as little-endian int32, seeded with the parent hash (or the salt).
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <span>

namespace tarmac::prefix {

uint64_t ChainedBlockHash(uint64_t parent_or_salt, std::span<const int32_t> tokens);

// The salt a namespace folds into its first block.
uint64_t NamespaceSalt(uint64_t ns);

}  // namespace tarmac::prefix
