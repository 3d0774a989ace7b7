#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

namespace tarmac::tok {
namespace {

// The split regexes of each model family, as published with their tokenizers.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const char* PatternFor(std::string_view name) {
  if (name == "gpt-2" || name == "gpt2" || name == "phi-2") return kGpt2;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3" || name == "falcon3")
    return kLlama3;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return kQwen2;
  return nullptr;
}

}  // namespace

struct PreTokenizer::Impl {
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::~PreTokenizer() = default;

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view pre_name) {
  const char* pattern = PatternFor(pre_name);
  if (pattern == nullptr) {
    return InvalidArgument(
        "tokenizer.ggml.pre '{}' is not supported (known: gpt-2, llama-bpe, qwen2)", pre_name);
  }
  auto impl = std::make_unique<Impl>();
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // MATCH_INVALID_UTF: invalid bytes never match, so they fall into the gaps Split keeps.
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off,
                             nullptr);
  if (impl->code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return Internal("pre-tokenizer regex for '{}' does not compile at {}: {}", pre_name, err_off,
                    reinterpret_cast<const char*>(buf));
  }
  pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE);  // best effort: falls back to interpreter
  return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(impl)));
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* out) const {
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), offset, 0, md, nullptr);
    if (rc < 0) {  // no further match: the rest is one piece
      out->push_back(text.substr(offset));
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (b > offset) out->push_back(text.substr(offset, b - offset));
    if (e > b) {
      out->push_back(text.substr(b, e - b));
      offset = e;
    } else {
      // An empty match cannot advance; take one byte as its own piece.
      out->push_back(text.substr(b, 1));
      offset = b + 1;
    }
  }
  pcre2_match_data_free(md);
}

}  // namespace tarmac::tok
