// StopMatcher: finds stop strings in streamed text. Text that might be the start of a stop
// string is held back until it is known not to be, so no stop string (or part of one) is ever
// emitted. Owns the held-back text; one per request; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tarmac::engine {

class StopMatcher {
 public:
  // Empty stop strings are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends text; returns what is safe to emit. When a stop string completes, returns the
  // text before it, sets *stopped, and drops everything from the stop string on.
  std::string Push(std::string_view text, bool* stopped);
  // The held-back text, at the end of the stream.
  std::string Flush();
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace tarmac::engine
