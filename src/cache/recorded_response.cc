#include "cache/recorded_response.h"

#include <nlohmann/json.hpp>

namespace tarmac::cache {
namespace {

using Json = nlohmann::json;
constexpr int kVersion = 1;

Json EventJson(const engine::TokenEvent& e) {
  Json top = Json::array();
  for (const sampling::TokenLogprob& t : e.top) top.push_back(Json::array({t.id, t.logprob}));
  Json j = {{"t", e.token}, {"x", Json::binary(std::vector<uint8_t>(e.text.begin(), e.text.end()))},
            {"l", e.logprob}, {"a", std::move(top)}, {"f", static_cast<int>(e.finish)}};
  if (e.last())
    j["m"] = {e.metrics.prompt_tokens, e.metrics.output_tokens, e.metrics.cached_prompt_tokens};
  return j;
}

engine::TokenEvent EventOf(const Json& j) {
  engine::TokenEvent e;
  e.token = j.at("t").get<int32_t>();
  const auto& text = j.at("x").get_binary();
  e.text.assign(text.begin(), text.end());
  e.logprob = j.at("l").get<float>();
  for (const Json& t : j.at("a")) e.top.push_back({t.at(0).get<int32_t>(), t.at(1).get<float>()});
  const int f = j.at("f").get<int>();
  if (f != static_cast<int>(engine::FinishReason::kNone) && f != static_cast<int>(engine::FinishReason::kStop) &&
      f != static_cast<int>(engine::FinishReason::kLength))
    throw std::runtime_error("an event's finish reason is not none, stop or length");
  e.finish = static_cast<engine::FinishReason>(f);
  if (e.last()) {
    const Json& m = j.at("m");
    e.metrics.prompt_tokens = m.at(0).get<int32_t>();
    e.metrics.output_tokens = m.at(1).get<int32_t>();
    e.metrics.cached_prompt_tokens = m.at(2).get<int32_t>();
  }
  return e;
}

}  // namespace

int64_t RecordedResponse::total_prompt_tokens() const {
  int64_t n = 0;
  for (int64_t p : prompt_tokens) n += p;
  return n;
}

int64_t RecordedResponse::total_output_tokens() const {
  int64_t n = 0;
  for (const auto& c : choices)
    for (const engine::TokenEvent& e : c) n += e.token >= 0 ? 1 : 0;
  return n;
}

std::string EncodeRecorded(const RecordedResponse& r) {
  Json choices = Json::array();
  for (const auto& c : r.choices) {
    Json events = Json::array();
    for (const engine::TokenEvent& e : c) events.push_back(EventJson(e));
    choices.push_back(std::move(events));
  }
  Json j = {{"v", kVersion}, {"model", r.model}, {"prompt_index", r.prompt_index},
            {"prompt_tokens", r.prompt_tokens}, {"choices", std::move(choices)}};
  if (r.route) {
    const router::RouteInfo& i = *r.route;
    j["route"] = {{"route", i.route}, {"policy", i.policy}, {"model", i.model}, {"reason", i.reason},
                  {"escalated", i.escalated}, {"escalated_from", i.escalated_from}, {"fallback", i.fallback}};
  }
  const std::vector<uint8_t> bytes = Json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

Result<RecordedResponse> DecodeRecorded(std::string_view bytes) {
  try {
    const Json j = Json::from_cbor(bytes.begin(), bytes.end());
    if (j.at("v").get<int>() != kVersion) return DataLoss("a cached response of another format version");
    RecordedResponse r;
    r.model = j.at("model").get<std::string>();
    r.prompt_index = j.at("prompt_index").get<std::vector<int32_t>>();
    r.prompt_tokens = j.at("prompt_tokens").get<std::vector<int64_t>>();
    for (const Json& c : j.at("choices")) {
      std::vector<engine::TokenEvent> events;
      for (const Json& e : c) events.push_back(EventOf(e));
      if (events.empty() || !events.back().last()) return DataLoss("a cached choice does not end finished");
      r.choices.push_back(std::move(events));
    }
    if (r.choices.size() != r.prompt_index.size()) return DataLoss("a cached response's choices and prompts disagree");
    for (int32_t p : r.prompt_index)
      if (p < 0 || static_cast<size_t>(p) >= r.prompt_tokens.size()) return DataLoss("a cached choice names no prompt");
    if (j.contains("route")) {
      const Json& i = j.at("route");
      router::RouteInfo info;
      info.route = i.at("route").get<std::string>();
      info.policy = i.at("policy").get<std::string>();
      info.model = i.at("model").get<std::string>();
      info.reason = i.at("reason").get<std::string>();
      info.escalated = i.at("escalated").get<bool>();
      info.escalated_from = i.at("escalated_from").get<std::string>();
      info.fallback = i.at("fallback").get<bool>();
      r.route = std::move(info);
    }
    return r;
  } catch (const std::exception& e) {
    return DataLoss("a cached response does not decode: {}", e.what());
  }
}

}  // namespace tarmac::cache
