#include "server/openai_render.h"

#include <ctime>
#include <random>

#include <fmt/format.h>

#include "base/check.h"

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

}  // namespace

std::string DumpJson(const Json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

Json RouteJson(const router::RouteInfo& info) {
  Json j = {{"route", info.route}, {"policy", info.policy}, {"model", info.model}, {"escalated", info.escalated},
            {"fallback", info.fallback}, {"reason", info.reason}};
  return j;
}

std::string RouteHeader(const router::RouteInfo& info) {
  std::string reason;
  for (char c : info.reason) {
    if (c == '"' || c == '\\') reason += '\\';
    if (c == '\r' || c == '\n') continue;
    reason += c;
  }
  return fmt::format("route={}; policy={}; model={}; escalated={}; fallback={}; reason=\"{}\"", info.route, info.policy,
                     info.model, info.escalated ? "yes" : "no", info.fallback ? "yes" : "no", reason);
}

void OpenAiRenderer::SetRoute(const std::optional<router::RouteInfo>& info) {
  route_ = info ? RouteJson(*info) : Json(nullptr);
}

OpenAiRenderer::OpenAiRenderer(ApiKind kind, bool stream, bool include_usage, bool logprobs, int32_t n)
    : kind_(kind), stream_(stream), include_usage_(include_usage), logprobs_(logprobs), n_(n),
      id_(RandomId(kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-")),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  TARMAC_CHECK(n >= 1);
}

void OpenAiRenderer::SetModel(std::string name, const tok::Tokenizer* tokenizer) {
  model_ = std::move(name);
  tok_ = tokenizer;
}

Json OpenAiRenderer::EmptyLogprobs() const {
  if (kind_ == ApiKind::kChat) return Json{{"content", Json::array()}};
  return Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
}

void OpenAiRenderer::SetChoices(const std::vector<int32_t>& prompt_index, std::vector<int64_t> prompt_tokens) {
  choices_.clear();
  for (size_t i = 0; i < prompt_index.size(); ++i) {
    ChoiceState c;
    c.index = static_cast<int32_t>(i);
    c.prompt_index = prompt_index[i];
    if (logprobs_) c.logprobs = EmptyLogprobs();
    choices_.push_back(std::move(c));
  }
  prompt_tokens_ = std::move(prompt_tokens);
}

bool OpenAiRenderer::all_done() const {
  for (const ChoiceState& c : choices_)
    if (!c.done()) return false;
  return true;
}

Json OpenAiRenderer::ChunkBase() const {
  Json j;
  j["id"] = id_;
  j["object"] = kind_ == ApiKind::kChat ? "chat.completion.chunk" : "text_completion";
  j["created"] = created_;
  j["model"] = model_;
  return j;
}

Json OpenAiRenderer::LogprobEntry(const engine::TokenEvent& ev, std::string* piece) const {
  *piece = tok_->TokenToPiece(ev.token, true);
  if (kind_ == ApiKind::kChat) {
    Json e;
    e["token"] = *piece;
    e["logprob"] = ev.logprob;
    e["bytes"] = Bytes(*piece);
    Json top = Json::array();
    for (const auto& t : ev.top) {
      const std::string p = tok_->TokenToPiece(t.id, true);
      top.push_back(Json{{"token", p}, {"logprob", t.logprob}, {"bytes", Bytes(p)}});
    }
    e["top_logprobs"] = std::move(top);
    return e;
  }
  Json top = Json::object();
  for (const auto& t : ev.top) top[tok_->TokenToPiece(t.id, true)] = t.logprob;
  return Json{{"token", *piece}, {"logprob", ev.logprob}, {"top", std::move(top)}};
}

void OpenAiRenderer::AppendLogprobs(Json* lp, int32_t* bytes_logged, const Json& e, const std::string& piece) const {
  if (kind_ == ApiKind::kChat) {
    (*lp)["content"].push_back(e);
    return;
  }
  (*lp)["tokens"].push_back(e["token"]);
  (*lp)["token_logprobs"].push_back(e["logprob"]);
  (*lp)["top_logprobs"].push_back(e["top"]);
  (*lp)["text_offset"].push_back(*bytes_logged);
  *bytes_logged += static_cast<int32_t>(piece.size());
}

void OpenAiRenderer::OnEvent(size_t i, engine::TokenEvent ev, std::string* sse) {
  TARMAC_CHECK(i < choices_.size() && tok_ != nullptr);
  ChoiceState& c = choices_[i];
  const bool chat = kind_ == ApiKind::kChat;
  Json lp_delta = nullptr;
  if (logprobs_ && ev.token >= 0) {
    std::string piece;
    const Json e = LogprobEntry(ev, &piece);
    // A streamed chunk carries the logprobs of its own tokens only.
    Json delta = EmptyLogprobs();
    int32_t delta_bytes = c.text_bytes_logged;
    AppendLogprobs(&delta, &delta_bytes, e, piece);
    AppendLogprobs(&c.logprobs, &c.text_bytes_logged, e, piece);
    lp_delta = std::move(delta);
  }
  c.text += ev.text;
  if (ev.last()) {
    c.finish = ev.finish;
    c.metrics = ev.metrics;
    if (ev.finish == engine::FinishReason::kError) c.error = ev.error.message();
  }
  if (!stream_) return;
  if (ev.finish == engine::FinishReason::kError) {
    *sse += "data: " + Unavailable("generation failed: " + c.error).ToJson() + "\n\n";
    return;
  }
  if (ev.finish == engine::FinishReason::kCancelled) return;
  if (ev.text.empty() && lp_delta.is_null() && !ev.last()) return;
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
  if (include_usage_) j["usage"] = nullptr;
  if (ev.last() && !route_.is_null()) j["tarmac"] = route_;
  *sse += "data: " + DumpJson(j) + "\n\n";
}

std::string OpenAiRenderer::StreamPrelude() const {
  if (kind_ != ApiKind::kChat) return "";
  std::string out;
  for (const ChoiceState& c : choices_) {
    Json ch;
    ch["index"] = c.index;
    ch["delta"] = Json{{"role", "assistant"}, {"content", ""}};
    ch["logprobs"] = nullptr;
    ch["finish_reason"] = nullptr;
    Json j = ChunkBase();
    j["choices"] = Json::array({std::move(ch)});
    if (include_usage_) j["usage"] = nullptr;
    out += "data: " + DumpJson(j) + "\n\n";
  }
  return out;
}

Json OpenAiRenderer::Usage() const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (int64_t p : prompt_tokens_) prompt += p;
  for (const ChoiceState& c : choices_) {
    completion += c.metrics.output_tokens;
    if (c.index % n_ == 0) cached += c.metrics.cached_prompt_tokens;
  }
  Json u;
  u["prompt_tokens"] = prompt;
  u["completion_tokens"] = completion;
  u["total_tokens"] = prompt + completion;
  u["prompt_tokens_details"] = Json{{"cached_tokens", cached}};
  return u;
}

std::string OpenAiRenderer::StreamEpilogue() const {
  std::string out;
  if (include_usage_) {
    Json j = ChunkBase();
    j["choices"] = Json::array();
    j["usage"] = Usage();
    out += "data: " + DumpJson(j) + "\n\n";
  }
  out += "data: [DONE]\n\n";
  return out;
}

std::string OpenAiRenderer::ResponseBody() const {
  Json j;
  j["id"] = id_;
  j["object"] = kind_ == ApiKind::kChat ? "chat.completion" : "text_completion";
  j["created"] = created_;
  j["model"] = model_;
  Json arr = Json::array();
  for (const ChoiceState& c : choices_) {
    Json ch;
    ch["index"] = c.index;
    if (kind_ == ApiKind::kChat) {
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
  if (!route_.is_null()) j["tarmac"] = route_;
  return DumpJson(j);
}

std::optional<ApiError> OpenAiRenderer::EngineError() const {
  for (const ChoiceState& c : choices_)
    if (c.finish == engine::FinishReason::kError) return Unavailable("generation failed: " + c.error, 1);
  return std::nullopt;
}

}  // namespace tarmac::server
