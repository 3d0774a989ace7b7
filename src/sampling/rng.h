// Rng: a small, fast, seedable generator whose output is identical on every platform and
// compiler (std::uniform_*_distribution is not), so "same seed -> same output" holds across
// machines. xoshiro256** seeded through splitmix64 (published algorithms). Not thread-safe:
// one per request.
#pragma once

#include <cstdint>

#include "base/hash.h"

namespace tarmac::sampling {

class Rng {
 public:
  explicit Rng(uint64_t seed) { Seed(seed); }

  void Seed(uint64_t seed) {
    for (uint64_t& s : s_) {
      s = SplitMix64(seed);
      seed += 0x9E3779B97F4A7C15ull;
    }
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace tarmac::sampling
