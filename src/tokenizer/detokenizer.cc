#include "tokenizer/detokenizer.h"

#include "base/utf8.h"

namespace tarmac::tok {

StreamDetokenizer::StreamDetokenizer(const Tokenizer* tokenizer, bool render_special)
    : tok_(tokenizer),
      render_special_(render_special),
      strip_space_(tokenizer->vocab().kind == VocabKind::kSpm &&
                   tokenizer->vocab().add_space_prefix) {}

std::string StreamDetokenizer::Push(int32_t id) {
  std::string piece = tok_->TokenToPiece(id, render_special_);
  if (strip_space_ && !piece.empty()) {
    if (piece[0] == ' ') piece.erase(0, 1);
    strip_space_ = false;
  }
  pending_ += piece;
  const int hold = IncompleteUtf8Suffix(pending_);
  std::string out = SanitizeUtf8(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamDetokenizer::Finish() {
  std::string out = SanitizeUtf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tarmac::tok
