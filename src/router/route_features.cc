#include "router/route_features.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace tarmac::router {

struct Pattern::Code {
  pcre2_code* code = nullptr;
  ~Code() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

Result<Pattern> Pattern::Compile(std::string_view pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (code->code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return InvalidArgument("pattern '{}' does not compile at offset {}: {}", pattern, off,
                           reinterpret_cast<const char*>(buf));
  }
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);  // best effort: the interpreter works too
  Pattern p;
  p.code_ = std::move(code);
  p.source_ = std::string(pattern);
  return p;
}

bool Pattern::Search(std::string_view text) const {
  if (!code_) return false;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  return rc >= 0;
}

}  // namespace tarmac::router
