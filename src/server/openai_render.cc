#include "server/openai_render.h"

#include <ctime>
#include <random>

#include <fmt/format.h>

#include "base/check.h"
#include "base/utf8.h"

namespace tarmac::server {
namespace {

using Json = nlohmann::ordered_json;

std::string RandomId(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

Json Bytes(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

std::string DumpJson(const Json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string LogprobTokenString(const std::string& piece) {
  if (IsValidUtf8(piece)) return piece;
  std::string out = "bytes:";
  for (unsigned char c : piece) out += fmt::format("\\x{:02x}", c);
  return out;
}

Json RouteJson(const router::RouteInfo& info) {
  Json j = {{"route", info.route}, {"policy", info.policy}, {"model", info.model}, {"escalated", info.escalated},
            {"fallback", info.fallback}, {"degraded", info.degraded}, {"reason", info.reason}};
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

OpenAiRenderer::OpenAiRenderer(const GenRequest& req)
    : kind_(req.kind), stream_(req.stream), include_usage_(req.include_usage), continuous_usage_(req.continuous_usage),
      logprobs_(req.logprobs), echo_(req.echo), n_(req.spec.n), tool_use_(req.spec.tool_use),
      prompt_inputs_(req.spec.prompts), id_(RandomId(req.kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-")),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  TARMAC_CHECK(n_ >= 1);
}

void OpenAiRenderer::SetModel(const router::PoolModel& model) {
  model_ = model.name;
  tok_ = model.tokenizer;
  tool_format_ = model.tool_format;
}

Json OpenAiRenderer::EmptyLogprobs() const {
  if (kind_ == ApiKind::kChat) return Json{{"content", Json::array()}};
  return Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
}

void OpenAiRenderer::SetChoices(const std::vector<int32_t>& prompt_index, std::vector<std::vector<int32_t>> prompts) {
  choices_.clear();
  for (size_t i = 0; i < prompt_index.size(); ++i) {
    ChoiceState c;
    c.index = static_cast<int32_t>(i);
    c.prompt_index = prompt_index[i];
    if (logprobs_) c.logprobs = EmptyLogprobs();
    choices_.push_back(std::move(c));
  }
  prompts_ = std::move(prompts);
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

Json OpenAiRenderer::FinishJson(const ChoiceState& c) const {
  if (c.finish == engine::FinishReason::kNone) return nullptr;
  const char* name = engine::FinishReasonName(c.finish);
  if (c.finish == engine::FinishReason::kStop && c.tools && c.tools->any() && tool_use_.choice != router::ToolChoice::kFunction)
    return "tool_calls";
  return name;
}

Json OpenAiRenderer::LogprobEntry(int32_t token, float logprob, const std::vector<sampling::TokenLogprob>& top,
                                  bool has_logprob) const {
  const std::string piece = tok_->TokenToPiece(token, true);
  if (kind_ == ApiKind::kChat) {
    Json e;
    e["token"] = piece;
    e["logprob"] = logprob;
    e["bytes"] = Bytes(piece);
    Json alts = Json::array();
    for (const auto& t : top) {
      const std::string p = tok_->TokenToPiece(t.id, true);
      alts.push_back(Json{{"token", p}, {"logprob", t.logprob}, {"bytes", Bytes(p)}});
    }
    e["top_logprobs"] = std::move(alts);
    return e;
  }
  const std::string key = LogprobTokenString(piece);
  if (!has_logprob) return Json{{"token", key}, {"logprob", nullptr}, {"top", nullptr}};  // an echoed first token
  Json alts = Json::object();
  for (const auto& t : top) {
    const std::string k = LogprobTokenString(tok_->TokenToPiece(t.id, true));
    if (!alts.contains(k)) alts[k] = t.logprob;
  }
  if (!alts.contains(key)) alts[key] = logprob;  // the sampled token is always among them
  return Json{{"token", key}, {"logprob", logprob}, {"top", std::move(alts)}};
}

void OpenAiRenderer::AppendLogprobs(Json* lp, int32_t* bytes_logged, const Json& e, int32_t token) const {
  if (kind_ == ApiKind::kChat) {
    (*lp)["content"].push_back(e);
    return;
  }
  (*lp)["tokens"].push_back(e["token"]);
  (*lp)["token_logprobs"].push_back(e["logprob"]);
  (*lp)["top_logprobs"].push_back(e["top"]);
  (*lp)["text_offset"].push_back(*bytes_logged);
  // Offsets index the text, which holds no control token's text.
  *bytes_logged += static_cast<int32_t>(tok_->TokenToPiece(token, false).size());
}

std::string OpenAiRenderer::Echo(ChoiceState& c, const engine::TokenEvent& ev, Json* lp_delta) {
  const std::vector<int32_t>& ids = prompts_[static_cast<size_t>(c.prompt_index)];
  const router::PromptInput& in = prompt_inputs_[static_cast<size_t>(c.prompt_index)];
  if (logprobs_) {
    int32_t delta_bytes = c.text_bytes_logged;
    for (size_t i = 0; i < ids.size(); ++i) {
      const bool has = i > 0 && i - 1 < ev.prompt_logprobs.size();
      const Json e = has ? LogprobEntry(ids[i], ev.prompt_logprobs[i - 1].logprob, ev.prompt_logprobs[i - 1].top, true)
                         : LogprobEntry(ids[i], 0, {}, false);
      AppendLogprobs(lp_delta, &delta_bytes, e, ids[i]);
      AppendLogprobs(&c.logprobs, &c.text_bytes_logged, e, ids[i]);
    }
  }
  return in.is_ids ? tok_->Decode(ids) : in.text;
}

void OpenAiRenderer::OnEvent(size_t i, engine::TokenEvent ev, std::string* sse) {
  TARMAC_CHECK(i < choices_.size() && tok_ != nullptr);
  ChoiceState& c = choices_[i];
  const bool chat = kind_ == ApiKind::kChat;
  Json lp_delta = logprobs_ ? EmptyLogprobs() : Json(nullptr);
  std::string text;
  if (!c.started) {
    c.started = true;
    if (chat && tool_use_.parsed() && tool_format_ != grammar::ToolCallFormat::kNone)
      c.tools = std::make_shared<ToolCallRender>(tool_format_, tool_use_,
                                                 fmt::format("call_{}{}_", id_.substr(id_.size() - 12), c.index));
    if (echo_ && !chat) text = Echo(c, ev, &lp_delta);
  }
  if (logprobs_ && ev.token >= 0) {
    // A streamed chunk carries the logprobs of its own tokens only.
    const Json e = LogprobEntry(ev.token, ev.logprob, ev.top, true);
    int32_t delta_bytes = c.text_bytes_logged;
    AppendLogprobs(&lp_delta, &delta_bytes, e, ev.token);
    AppendLogprobs(&c.logprobs, &c.text_bytes_logged, e, ev.token);
  }
  if (ev.token >= 0) ++c.tokens;
  Json tool_delta = nullptr;
  if (c.tools) {
    ToolCallRender::Delta d = c.tools->Feed(ev.text, ev.last());
    text += d.content;
    tool_delta = std::move(d.tool_calls);
  } else {
    text += ev.text;
  }
  c.text += text;
  if (ev.last()) {
    c.finish = ev.finish;
    c.metrics = ev.metrics;
    if (ev.finish == engine::FinishReason::kError) {
      c.error = ev.error.message();
      c.error_code = ev.error.code();
    }
  }
  if (!stream_) return;
  if (ev.finish == engine::FinishReason::kError) {
    *sse += "data: " + ChoiceError(c).ToJson() + "\n\n";
    return;
  }
  if (ev.finish == engine::FinishReason::kCancelled) return;
  const bool has_lp = logprobs_ && !(chat ? lp_delta["content"] : lp_delta["tokens"]).empty();
  if (text.empty() && !has_lp && tool_delta.is_null() && !ev.last()) return;
  Json ch;
  ch["index"] = c.index;
  if (chat) {
    Json delta = Json::object();
    if (!text.empty() || (!ev.last() && tool_delta.is_null())) delta["content"] = text;
    if (!tool_delta.is_null()) delta["tool_calls"] = std::move(tool_delta);
    ch["delta"] = std::move(delta);
  } else {
    ch["text"] = text;
  }
  ch["logprobs"] = has_lp ? std::move(lp_delta) : Json(nullptr);
  ch["finish_reason"] = FinishJson(c);
  Json j = ChunkBase();
  j["choices"] = Json::array({std::move(ch)});
  if (include_usage_) j["usage"] = continuous_usage_ ? Usage(false) : Json(nullptr);
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
    if (include_usage_) j["usage"] = continuous_usage_ ? Usage(false) : Json(nullptr);
    out += "data: " + DumpJson(j) + "\n\n";
  }
  return out;
}

Json OpenAiRenderer::Usage(bool final) const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (const std::vector<int32_t>& p : prompts_) prompt += static_cast<int64_t>(p.size());
  for (const ChoiceState& c : choices_) {
    completion += final ? c.metrics.output_tokens : c.tokens;
    if (c.index % n_ == 0) cached += c.metrics.cached_prompt_tokens;
  }
  Json u;
  u["prompt_tokens"] = prompt;
  u["completion_tokens"] = completion;
  u["total_tokens"] = prompt + completion;
  if (final) u["prompt_tokens_details"] = Json{{"cached_tokens", cached}};
  return u;
}

std::string OpenAiRenderer::StreamEpilogue() const {
  std::string out;
  if (include_usage_) {
    Json j = ChunkBase();
    j["choices"] = Json::array();
    j["usage"] = Usage(true);
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
      const bool calls = c.tools && c.tools->any();
      Json msg = {{"role", "assistant"}, {"content", calls && c.text.empty() ? Json(nullptr) : Json(c.text)}};
      if (calls) msg["tool_calls"] = c.tools->MessageToolCalls();
      ch["message"] = std::move(msg);
    } else {
      ch["text"] = c.text;
    }
    ch["logprobs"] = c.logprobs;
    ch["finish_reason"] = FinishJson(c);
    arr.push_back(std::move(ch));
  }
  j["choices"] = std::move(arr);
  j["usage"] = Usage(true);
  if (!route_.is_null()) j["tarmac"] = route_;
  return DumpJson(j);
}

ApiError ChoiceError(const ChoiceState& c) {
  // A request whose own processing broke (Internal) is the server's fault, a 500; an engine
  // that stopped or was full is a 503 worth retrying.
  if (c.error_code == StatusCode::kInternal) return ServerError("generation failed: " + c.error);
  return Unavailable("generation failed: " + c.error, 1);
}

std::optional<ApiError> OpenAiRenderer::EngineError() const {
  for (const ChoiceState& c : choices_)
    if (c.finish == engine::FinishReason::kError) return ChoiceError(c);
  return std::nullopt;
}

}  // namespace tarmac::server
