// Monotonic clock helpers (steady_clock); thread-safe, no state.
#pragma once

#include <chrono>
#include <cstdint>

namespace tarmac {

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline double NowSeconds() { return static_cast<double>(NowNanos()) * 1e-9; }

}  // namespace tarmac
