// StreamDetokenizer: turns a stream of token ids into text chunks that never split a UTF-8
// character (a byte token may carry half of one); invalid byte sequences come out as U+FFFD,
// so every chunk is valid UTF-8 (JSON/SSE need that). Owns only a few pending bytes; one per
// request stream; not thread-safe (one producer).
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace tarmac::tok {

class StreamDetokenizer {
 public:
  // Preconditions: tokenizer outlives this object.
  explicit StreamDetokenizer(const Tokenizer* tokenizer, bool render_special = false);

  // Returns the text that is complete after adding `id` (possibly empty).
  std::string Push(int32_t id);
  // Returns whatever is pending at the end of the stream; invalid leftovers become U+FFFD.
  std::string Finish();

 private:
  const Tokenizer* tok_;
  bool render_special_;
  bool strip_space_;   // SPM: drop the space prefix of the first piece, as Decode does
  std::string pending_;
};

}  // namespace tarmac::tok
