// Small non-cryptographic hashes (stable across platforms and runs: used for deterministic
// seeding and keys). Pure functions, thread-safe. Cryptographic digests: base/digest.h.
#pragma once

#include <cstdint>
#include <string_view>

namespace tarmac {

// SplitMix64 finaliser of x + golden ratio: a bijective 64-bit mix, good for deriving
// independent seeds from consecutive integers.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 64-bit FNV-1a of the bytes of s.
inline uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace tarmac
