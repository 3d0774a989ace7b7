#include "server/generation.h"

#include <ctime>
#include <random>

#include "server/auth.h"

namespace tarmac::server {
namespace {

using Json = nlohmann::ordered_json;

std::string RandomId(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

const char* FinishName(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::kStop: return "stop";
    case engine::FinishReason::kLength: return "length";
    case engine::FinishReason::kCancelled: return "abort";
    case engine::FinishReason::kError: return "error";
    default: return nullptr;
  }
}

Json FinishJson(engine::FinishReason r) {
  const char* n = FinishName(r);
  return n ? Json(n) : Json(nullptr);
}

Json Bytes(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// Parameter an engine/sampler message is about: its first word when that is a parameter.
std::string ParamOf(const std::string& msg) {
  static const char* kParams[] = {"max_tokens", "temperature", "top_k", "top_p", "min_p",
                                  "repetition_penalty", "presence_penalty", "frequency_penalty",
                                  "logit_bias", "top_logprobs"};
  for (const char* p : kParams)
    if (msg.rfind(p, 0) == 0) return p;
  if (msg.rfind("prompt", 0) == 0 || msg.rfind("the prompt", 0) == 0) return "prompt";
  if (msg.rfind("stop", 0) == 0) return "stop_token_ids";
  return "";
}

}  // namespace

std::string DumpJson(const Json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

Generation::Generation(GenRequest req, ServedModel* model, std::string tenant)
    : req_(std::move(req)), model_(model), tenant_(std::move(tenant)),
      id_(RandomId(req_.kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-")),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

std::optional<ApiError> Generation::Prepare() {
  const tok::Tokenizer& tk = *model_->tokenizer;
  const int32_t n_vocab = tk.n_vocab();
  const int32_t ctx = model_->max_context;
  const bool chat = req_.kind == ApiKind::kChat;
  const std::string prompt_param = chat ? "messages" : "prompt";
  if (chat) {
    auto text = model_->chat.Render(req_.messages, req_.tools, req_.add_generation_prompt);
    if (!text.ok()) return BadRequest("messages", "the chat template rejected the messages: " + text.status().message(), "invalid_value");
    prompt_ids_.push_back(tk.Encode(*text, model_->chat.encode_options()));
  } else {
    for (const PromptInput& p : req_.prompts) {
      if (p.is_ids) {
        for (size_t i = 0; i < p.ids.size(); ++i) {
          if (p.ids[i] < 0 || p.ids[i] >= n_vocab)
            return BadRequest("prompt", fmt::format("prompt token {} at index {} is outside the vocabulary (0..{})",
                                                    p.ids[i], i, n_vocab - 1), "invalid_value");
        }
        prompt_ids_.push_back(p.ids);
      } else {
        prompt_ids_.push_back(tk.Encode(p.text, tok::EncodeOptions{true, false}));
      }
    }
  }
  int32_t max_tokens = req_.max_tokens.value_or(0);
  for (const auto& ids : prompt_ids_) {
    const int64_t len = static_cast<int64_t>(ids.size());
    if (len == 0) return BadRequest(prompt_param, "the prompt encodes to no tokens", "invalid_value");
    if (len >= ctx) {
      return BadRequest(prompt_param, fmt::format("This model's maximum context length is {} tokens. However, your prompt has {} tokens "
                                                  "(at least one must be left for the completion).", ctx, len),
                        "context_length_exceeded");
    }
    if (req_.max_tokens && len + *req_.max_tokens > ctx) {
      return BadRequest("max_tokens",
                        fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                    "({} in the prompt, {} for the completion). Please reduce the prompt or max_tokens.",
                                    ctx, len + *req_.max_tokens, len, *req_.max_tokens),
                        "context_length_exceeded");
    }
  }
  for (const auto& [id, bias] : req_.sampling.logit_bias) {
    if (id >= n_vocab)
      return BadRequest("logit_bias", fmt::format("logit_bias token {} is outside the vocabulary (0..{})", id, n_vocab - 1), "invalid_value");
  }
  for (int32_t id : req_.stop_token_ids) {
    if (id < 0 || id >= n_vocab)
      return BadRequest("stop_token_ids", fmt::format("stop token {} is outside the vocabulary (0..{})", id, n_vocab - 1), "invalid_value");
  }
  if (Status st = req_.sampling.Validate(n_vocab); !st.ok()) return BadRequest(ParamOf(st.message()), st.message(), "invalid_value");

  const uint64_t ns = PrefixNamespace(tenant_, model_->name);
  int32_t index = 0;
  for (size_t p = 0; p < prompt_ids_.size(); ++p) {
    const int32_t len = static_cast<int32_t>(prompt_ids_[p].size());
    const int32_t mt = req_.max_tokens ? max_tokens : (chat ? ctx - len : std::min(16, ctx - len));
    for (int32_t j = 0; j < req_.n; ++j) {
      Choice c;
      c.index = index++;
      c.prompt_index = static_cast<int32_t>(p);
      engine::EngineRequest& r = c.request;
      r.prompt = prompt_ids_[p];
      r.sampling = req_.sampling;
      if (req_.sampling.seed) r.sampling.seed = *req_.sampling.seed + static_cast<uint64_t>(j);
      r.max_tokens = mt;
      r.ignore_eos = req_.ignore_eos;
      r.stop_token_ids = req_.stop_token_ids;
      r.stop = req_.stop;
      r.ns = ns;
      r.priority = req_.priority;
      r.speculative = req_.speculative;
      r.task = req_.task;
      if (req_.logprobs) c.logprobs = chat ? Json{{"content", Json::array()}}
                                           : Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()},
                                                  {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
      admission_tokens_ += len + mt;
      choices_.push_back(std::move(c));
    }
  }
  return std::nullopt;
}

std::optional<ApiError> Generation::Start(const std::function<void()>& notify) {
  for (size_t i = 0; i < choices_.size(); ++i) {
    auto s = model_->engine->Submit(choices_[i].request);
    if (!s.ok()) {
      for (size_t k = 0; k < i; ++k) model_->engine->Cancel(choices_[k].stream->id());
      for (size_t k = 0; k < i; ++k) choices_[k].stream.reset();
      const std::string& msg = s.status().message();
      if (s.status().code() == StatusCode::kInvalidArgument) return BadRequest(ParamOf(msg), msg, "invalid_value");
      return Unavailable(msg, 1);
    }
    choices_[i].stream = std::move(s).value();
  }
  started_ = true;
  for (Choice& c : choices_) c.stream->SetNotifier(notify);
  return std::nullopt;
}

void Generation::CancelAll() {
  if (!started_) return;
  for (Choice& c : choices_)
    if (!c.done()) model_->engine->Cancel(c.stream->id());
}

Json Generation::ChunkBase() const {
  Json j;
  j["id"] = id_;
  j["object"] = req_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion";
  j["created"] = created_;
  j["model"] = model_->name;
  return j;
}

Json Generation::LogprobEntry(Choice& c, const engine::TokenEvent& ev, std::string* piece) const {
  const tok::Tokenizer& tk = *model_->tokenizer;
  *piece = tk.TokenToPiece(ev.token, true);
  if (req_.kind == ApiKind::kChat) {
    Json e;
    e["token"] = *piece;
    e["logprob"] = ev.logprob;
    e["bytes"] = Bytes(*piece);
    Json top = Json::array();
    for (const auto& t : ev.top) {
      const std::string p = tk.TokenToPiece(t.id, true);
      top.push_back(Json{{"token", p}, {"logprob", t.logprob}, {"bytes", Bytes(p)}});
    }
    e["top_logprobs"] = std::move(top);
    return e;
  }
  Json top = Json::object();
  for (const auto& t : ev.top) top[tk.TokenToPiece(t.id, true)] = t.logprob;
  return Json{{"token", *piece}, {"logprob", ev.logprob}, {"top", std::move(top)}};
}

void Generation::AppendLogprobs(Choice& c, const Json& e, const std::string& piece) const {
  if (req_.kind == ApiKind::kChat) {
    c.logprobs["content"].push_back(e);
    return;
  }
  c.logprobs["tokens"].push_back(e["token"]);
  c.logprobs["token_logprobs"].push_back(e["logprob"]);
  c.logprobs["top_logprobs"].push_back(e["top"]);
  c.logprobs["text_offset"].push_back(c.text_bytes_logged);
  c.text_bytes_logged += static_cast<int32_t>(piece.size());
}

bool Generation::Poll(std::string* sse) {
  bool all = true;
  const bool chat = req_.kind == ApiKind::kChat;
  for (Choice& c : choices_) {
    engine::TokenEvent ev;
    while (!c.done() && c.stream && c.stream->TryNext(&ev)) {
      Json lp_delta = nullptr;
      if (req_.logprobs && ev.token >= 0 && !c.logprobs.is_null()) {
        std::string piece;
        Json e = LogprobEntry(c, ev, &piece);
        // A streamed chunk carries the logprobs of its own tokens only.
        Choice tmp;
        tmp.logprobs = chat ? Json{{"content", Json::array()}}
                            : Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()},
                                   {"top_logprobs", Json::array()}, {"text_offset", Json::array()}};
        tmp.text_bytes_logged = c.text_bytes_logged;
        AppendLogprobs(tmp, e, piece);
        AppendLogprobs(c, e, piece);
        lp_delta = std::move(tmp.logprobs);
      }
      c.text += ev.text;
      if (ev.last()) {
        c.finish = ev.finish;
        c.metrics = ev.metrics;
        if (ev.finish == engine::FinishReason::kError) c.error = ev.error.message();
      }
      if (!req_.stream) continue;
      if (ev.finish == engine::FinishReason::kError) {
        *sse += "data: " + Unavailable("generation failed: " + c.error).ToJson() + "\n\n";
        continue;
      }
      if (ev.finish == engine::FinishReason::kCancelled) continue;
      if (ev.text.empty() && lp_delta.is_null() && !ev.last()) continue;
      Json ch;
      ch["index"] = c.index;
      if (chat) {
        ch["delta"] = ev.text.empty() && ev.last() ? Json::object() : Json{{"content", ev.text}};
      } else {
        ch["text"] = ev.text;
      }
      ch["logprobs"] = std::move(lp_delta);
      ch["finish_reason"] = FinishJson(c.finish);
      Json j = ChunkBase();
      j["choices"] = Json::array({std::move(ch)});
      if (req_.include_usage) j["usage"] = nullptr;
      *sse += "data: " + DumpJson(j) + "\n\n";
    }
    if (!c.done()) all = false;
  }
  return all;
}

std::string Generation::StreamPrelude() const {
  if (req_.kind != ApiKind::kChat) return "";
  std::string out;
  for (const Choice& c : choices_) {
    Json ch;
    ch["index"] = c.index;
    ch["delta"] = Json{{"role", "assistant"}, {"content", ""}};
    ch["logprobs"] = nullptr;
    ch["finish_reason"] = nullptr;
    Json j = ChunkBase();
    j["choices"] = Json::array({std::move(ch)});
    if (req_.include_usage) j["usage"] = nullptr;
    out += "data: " + DumpJson(j) + "\n\n";
  }
  return out;
}

Json Generation::Usage() const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (size_t p = 0; p < prompt_ids_.size(); ++p) prompt += static_cast<int64_t>(prompt_ids_[p].size());
  for (const Choice& c : choices_) {
    completion += c.metrics.output_tokens;
    if (c.index % req_.n == 0) cached += c.metrics.cached_prompt_tokens;
  }
  Json u;
  u["prompt_tokens"] = prompt;
  u["completion_tokens"] = completion;
  u["total_tokens"] = prompt + completion;
  u["prompt_tokens_details"] = Json{{"cached_tokens", cached}};
  return u;
}

std::string Generation::StreamEpilogue() const {
  std::string out;
  if (req_.include_usage) {
    Json j = ChunkBase();
    j["choices"] = Json::array();
    j["usage"] = Usage();
    out += "data: " + DumpJson(j) + "\n\n";
  }
  out += "data: [DONE]\n\n";
  return out;
}

std::string Generation::ResponseBody() const {
  Json j;
  j["id"] = id_;
  j["object"] = req_.kind == ApiKind::kChat ? "chat.completion" : "text_completion";
  j["created"] = created_;
  j["model"] = model_->name;
  Json arr = Json::array();
  for (const Choice& c : choices_) {
    Json ch;
    ch["index"] = c.index;
    if (req_.kind == ApiKind::kChat) {
      ch["message"] = Json{{"role", "assistant"}, {"content", c.text}};
    } else {
      ch["text"] = c.text;
    }
    ch["logprobs"] = c.logprobs;
    ch["finish_reason"] = FinishJson(c.finish);
    arr.push_back(std::move(ch));
  }
  j["choices"] = std::move(arr);
  j["usage"] = Usage();
  return DumpJson(j);
}

std::optional<ApiError> Generation::EngineError() const {
  for (const Choice& c : choices_)
    if (c.finish == engine::FinishReason::kError) return Unavailable("generation failed: " + c.error, 1);
  return std::nullopt;
}

RequestBucket Generation::BucketOf(const Choice& c) const {
  return MakeBucket(model_->name, static_cast<int64_t>(c.request.prompt.size()), c.request.max_tokens, c.request.priority);
}

}  // namespace tarmac::server
