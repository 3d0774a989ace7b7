#include "tokenizer/vocab_gguf.h"

#include "base/log.h"

namespace tarmac::tok {
namespace {

Result<int32_t> OptionalId(const gguf::File& f, std::string_view key, size_t n_vocab) {
  if (f.Find(key) == nullptr) return -1;
  TARMAC_ASSIGN_OR_RETURN(uint64_t v, f.GetUint(key));
  if (v >= n_vocab) return InvalidArgument("{} = {} is outside the vocabulary of {} tokens", key, v, n_vocab);
  return static_cast<int32_t>(v);
}

Result<bool> OptionalBool(const gguf::File& f, std::string_view key, bool fallback) {
  if (f.Find(key) == nullptr) return fallback;
  return f.GetBool(key);
}

}  // namespace

Result<Vocab> LoadVocab(const gguf::File& file) {
  Vocab v;
  TARMAC_ASSIGN_OR_RETURN(std::string model, file.GetString("tokenizer.ggml.model"));
  if (model == "llama") {
    v.kind = VocabKind::kSpm;
  } else if (model == "gpt2") {
    v.kind = VocabKind::kBpe;
  } else {
    return Unimplemented("tokenizer.ggml.model '{}' is not supported (llama, gpt2)", model);
  }
  TARMAC_ASSIGN_OR_RETURN(v.tokens, file.GetStringArray("tokenizer.ggml.tokens"));
  const size_t n = v.tokens.size();

  if (const gguf::Value* types = file.Find("tokenizer.ggml.token_type")) {
    const auto* arr = types->AsArray();
    if (arr == nullptr || arr->size() != n)
      return InvalidArgument("tokenizer.ggml.token_type must be an array of {} integers", n);
    v.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      auto t = (*arr)[i].AsInt64();
      if (!t || *t < 0 || *t > 6)
        return InvalidArgument("tokenizer.ggml.token_type[{}] is not a token type (0..6)", i);
      v.types.push_back(static_cast<TokenType>(*t));
    }
  }
  if (const gguf::Value* scores = file.Find("tokenizer.ggml.scores")) {
    const auto* arr = scores->AsArray();
    if (arr == nullptr || arr->size() != n)
      return InvalidArgument("tokenizer.ggml.scores must be an array of {} floats", n);
    v.scores.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      auto s = (*arr)[i].AsDouble();
      if (!s) return InvalidArgument("tokenizer.ggml.scores[{}] is not a float", i);
      v.scores.push_back(static_cast<float>(*s));
    }
  } else if (v.kind == VocabKind::kSpm) {
    return InvalidArgument("tokenizer.ggml.scores is required for a 'llama' (SentencePiece) vocabulary");
  }
  if (v.kind == VocabKind::kBpe) {
    TARMAC_ASSIGN_OR_RETURN(v.merges, file.GetStringArray("tokenizer.ggml.merges"));
    if (file.Find("tokenizer.ggml.pre") != nullptr) {
      TARMAC_ASSIGN_OR_RETURN(v.pre, file.GetString("tokenizer.ggml.pre"));
    } else {
      TLOG_WARN("tokenizer.ggml.pre missing; using the gpt-2 pre-tokenizer");
      v.pre = "gpt-2";
    }
  }
  TARMAC_ASSIGN_OR_RETURN(v.bos_id, OptionalId(file, "tokenizer.ggml.bos_token_id", n));
  TARMAC_ASSIGN_OR_RETURN(v.eos_id, OptionalId(file, "tokenizer.ggml.eos_token_id", n));
  TARMAC_ASSIGN_OR_RETURN(v.unk_id, OptionalId(file, "tokenizer.ggml.unknown_token_id", n));
  TARMAC_ASSIGN_OR_RETURN(v.pad_id, OptionalId(file, "tokenizer.ggml.padding_token_id", n));
  TARMAC_ASSIGN_OR_RETURN(v.eot_id, OptionalId(file, "tokenizer.ggml.eot_token_id", n));
  const bool spm = v.kind == VocabKind::kSpm;
  TARMAC_ASSIGN_OR_RETURN(v.add_bos, OptionalBool(file, "tokenizer.ggml.add_bos_token", spm));
  TARMAC_ASSIGN_OR_RETURN(v.add_eos, OptionalBool(file, "tokenizer.ggml.add_eos_token", false));
  TARMAC_ASSIGN_OR_RETURN(v.add_space_prefix,
                          OptionalBool(file, "tokenizer.ggml.add_space_prefix", spm));
  if (file.Find("tokenizer.chat_template") != nullptr) {
    TARMAC_ASSIGN_OR_RETURN(v.chat_template, file.GetString("tokenizer.chat_template"));
  }
  return v;
}

}  // namespace tarmac::tok
