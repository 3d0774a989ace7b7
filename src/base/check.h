// Invariant checks. TARMAC_CHECK is always on (programming errors, never bad input: bad input
// gets a Status). TARMAC_DCHECK compiles away in NDEBUG builds.
//
// A failed check aborts the process, except on a thread inside a CheckFailuresThrow scope:
// there it throws CheckFailure, so that a serving loop can fail the one request whose
// processing broke an invariant and go on (the engine's step thread does, then checks its
// integrity). Other threads (a thread pool's workers) still abort.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tarmac {

// What a failed check throws inside a CheckFailuresThrow scope.
class CheckFailure : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
inline thread_local int check_failures_throw = 0;  // CheckFailuresThrow scopes open on this thread

[[noreturn]] inline void CheckFailed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "tarmac: check failed: %s at %s:%d\n", expr, file, line);
  if (check_failures_throw > 0)
    throw CheckFailure(std::string("check failed: ") + expr + " at " + file + ":" + std::to_string(line));
  std::abort();
}
}  // namespace detail

// While alive, failed checks on this thread throw CheckFailure instead of aborting. Nests.
class CheckFailuresThrow {
 public:
  CheckFailuresThrow() { ++detail::check_failures_throw; }
  ~CheckFailuresThrow() { --detail::check_failures_throw; }
  CheckFailuresThrow(const CheckFailuresThrow&) = delete;
  CheckFailuresThrow& operator=(const CheckFailuresThrow&) = delete;
};

}  // namespace tarmac

#define TARMAC_CHECK(cond) \
  ((cond) ? (void)0 : ::tarmac::detail::CheckFailed(#cond, __FILE__, __LINE__))

#ifdef NDEBUG
#define TARMAC_DCHECK(cond) ((void)0)
#else
#define TARMAC_DCHECK(cond) TARMAC_CHECK(cond)
#endif
