// Invariant checks. TARMAC_CHECK is always on (programming errors, never bad input: bad input
// gets a Status). TARMAC_DCHECK compiles away in NDEBUG builds.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tarmac::detail {
[[noreturn]] inline void CheckFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "tarmac: check failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}
}  // namespace tarmac::detail

#define TARMAC_CHECK(cond) \
  ((cond) ? (void)0 : ::tarmac::detail::CheckFailed(#cond, __FILE__, __LINE__))

#ifdef NDEBUG
#define TARMAC_DCHECK(cond) ((void)0)
#else
#define TARMAC_DCHECK(cond) TARMAC_CHECK(cond)
#endif
