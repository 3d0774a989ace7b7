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

// Wall-clock seconds since the Unix epoch (for ages shown to users; not for intervals).
inline double NowUnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tarmac
