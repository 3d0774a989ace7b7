#include "server/openai_request.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "server/json_fields.h"
#include "server/openai_messages.h"
#include "server/openai_structured.h"
#include "server/openai_tools.h"

namespace tarmac::server {
namespace {

// A bucket name (task, SLA tier): at most 64 letters, digits, '-' and '_'.
std::optional<ApiError> GetName(const Json& j, const char* key, std::string* out) {
  if (auto e = GetString(j, key, out)) return e;
  if (out->size() > 64) return BadRequest(key, std::string("'") + key + "' must be at most 64 bytes", "invalid_value");
  for (char ch : *out) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_')
      return BadRequest(key, std::string("'") + key + "' may hold only letters, digits, '-' and '_'", "invalid_value");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseModel(const Json& j, std::string* model) {
  auto it = j.find("model");
  if (it == j.end() || it->is_null()) return BadRequest("model", "'model' is required", "missing_required_parameter");
  if (!it->is_string()) return WrongType("model", "a string", *it);
  *model = it->get<std::string>();
  if (model->empty()) return BadRequest("model", "'model' must not be empty", "invalid_value");
  return std::nullopt;
}

std::optional<ApiError> ParseIdArray(const Json& a, const std::string& param, std::vector<int32_t>* out) {
  for (size_t i = 0; i < a.size(); ++i) {
    const Json& v = a[i];
    if (!v.is_number_integer() && !v.is_number_unsigned())
      return BadRequest(param, "'" + param + "' must hold integer token ids; element " + std::to_string(i) +
                                   " is " + TypeName(v), "invalid_type");
    if (v.is_number_unsigned() ? v.get<uint64_t>() > INT32_MAX : (v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX))
      return BadRequest(param, "'" + param + "' element " + std::to_string(i) + " (" + v.dump() +
                                   ") is not a valid token id", "invalid_value");
    out->push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return std::nullopt;
}

std::optional<ApiError> ParsePrompt(const Json& j, std::vector<router::PromptInput>* prompts) {
  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return BadRequest("prompt", "'prompt' is required", "missing_required_parameter");
  const Json& p = *it;
  auto empty = [] { return BadRequest("prompt", "'prompt' must not be empty", "invalid_value"); };
  if (p.is_string()) {
    if (p.get_ref<const std::string&>().empty()) return empty();
    prompts->push_back({false, p.get<std::string>(), {}});
    return std::nullopt;
  }
  if (!p.is_array()) return WrongType("prompt", "a string, an array of strings or an array of token ids", p);
  if (p.empty()) return empty();
  if (p[0].is_number()) {
    router::PromptInput in;
    in.is_ids = true;
    if (auto e = ParseIdArray(p, "prompt", &in.ids)) return e;
    prompts->push_back(std::move(in));
    return std::nullopt;
  }
  if (p.size() > static_cast<size_t>(kMaxPrompts))
    return BadRequest("prompt", "'prompt' holds " + std::to_string(p.size()) + " prompts; at most " +
                                    std::to_string(kMaxPrompts) + " are allowed", "invalid_value");
  for (size_t i = 0; i < p.size(); ++i) {
    const Json& e = p[i];
    if (e.is_string()) {
      if (e.get_ref<const std::string&>().empty()) return empty();
      prompts->push_back({false, e.get<std::string>(), {}});
    } else if (e.is_array()) {
      if (e.empty()) return empty();
      router::PromptInput in;
      in.is_ids = true;
      if (auto err = ParseIdArray(e, "prompt", &in.ids)) return err;
      prompts->push_back(std::move(in));
    } else {
      return BadRequest("prompt", "'prompt' element " + std::to_string(i) + " must be a string or an array of token ids, got " +
                                      TypeName(e), "invalid_type");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> ParseStop(const Json& j, std::vector<std::string>* stop) {
  auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return std::nullopt;
  auto add = [&](const Json& s) -> std::optional<ApiError> {
    if (!s.is_string()) return BadRequest("stop", std::string("'stop' entries must be strings, got ") + TypeName(s), "invalid_type");
    const std::string& v = s.get_ref<const std::string&>();
    if (v.empty()) return BadRequest("stop", "'stop' strings must not be empty", "invalid_value");
    if (v.size() > static_cast<size_t>(kMaxStopBytes))
      return BadRequest("stop", "'stop' strings must be at most " + std::to_string(kMaxStopBytes) + " bytes", "invalid_value");
    stop->push_back(v);
    return std::nullopt;
  };
  if (it->is_string()) return add(*it);
  if (!it->is_array()) return WrongType("stop", "a string or an array of strings", *it);
  if (it->size() > static_cast<size_t>(kMaxStop))
    return BadRequest("stop", "'stop' holds " + std::to_string(it->size()) + " strings; at most " +
                                  std::to_string(kMaxStop) + " are allowed", "invalid_value");
  for (const Json& s : *it)
    if (auto e = add(s)) return e;
  return std::nullopt;
}

std::optional<ApiError> ParseLogitBias(const Json& j, sampling::SamplingParams* sp) {
  auto it = j.find("logit_bias");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return WrongType("logit_bias", "an object mapping token ids to biases", *it);
  if (it->size() > static_cast<size_t>(kMaxLogitBias))
    return BadRequest("logit_bias", "'logit_bias' holds more than " + std::to_string(kMaxLogitBias) + " entries", "invalid_value");
  for (auto e = it->begin(); e != it->end(); ++e) {
    const std::string& key = e.key();
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != key.size() || id < 0 || id > INT32_MAX)
      return BadRequest("logit_bias", "'logit_bias' keys must be token ids (non-negative integers), got '" + key + "'", "invalid_value");
    if (!e->is_number() || !std::isfinite(e->get<double>()) || e->get<double>() < -100 || e->get<double>() > 100)
      return BadRequest("logit_bias", "'logit_bias' values must be numbers in [-100, 100]; token " + key + " has " + e->dump(), "invalid_value");
    sp->logit_bias.emplace_back(static_cast<int32_t>(id), e->get<float>());
  }
  return std::nullopt;
}

// Fields whose accepted values change nothing here (nothing is stored; one service tier; text
// only): those values pass, any other is a 400 naming the field rather than being ignored.
std::optional<ApiError> CheckInertFields(const Json& j) {
  auto given = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  if (given("store") && !(j["store"].is_boolean() && !j["store"].get<bool>()))
    return BadRequest("store", "'store' must be false: tarmac does not store completions", "unsupported_parameter");
  if (given("metadata")) {
    const Json& m = j["metadata"];
    if (!m.is_object() || m.size() > 16) return BadRequest("metadata", "'metadata' must be an object of at most 16 strings", "invalid_value");
    for (const auto& [k, v] : m.items())
      if (!v.is_string()) return BadRequest("metadata", "'metadata' values must be strings; '" + k + "' is not", "invalid_value");
  }
  if (given("service_tier") && j["service_tier"] != "auto" && j["service_tier"] != "default")
    return BadRequest("service_tier", "'service_tier' must be 'auto' or 'default' (tarmac has one tier)", "unsupported_parameter");
  if (given("reasoning_effort"))
    return BadRequest("reasoning_effort", "'reasoning_effort' is not supported (no reasoning models)", "unsupported_parameter");
  if (given("modalities") && j["modalities"] != Json::array({"text"}))
    return BadRequest("modalities", "'modalities' must be [\"text\"] (text only)", "unsupported_parameter");
  return std::nullopt;
}

const std::set<std::string> kCommonFields = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "seed", "stream",
    "stream_options", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "user",
    "priority", "logprobs", "stop_token_ids", "ignore_eos", "best_of", "service_tier", "metadata", "store",
    "speculative", "task", "sla", "risk", "response_format", "structured_outputs", "cache", "session_id", "locale"};
// Fields that never change what is generated (or enter the response cache's key elsewhere:
// the prompt as token ids, the model in the scope).
const std::set<std::string> kNotInKey = {"model", "prompt", "messages", "stream", "stream_options", "user",
                                         "cache", "session_id", "locale"};
const std::set<std::string> kCompletionOnly = {"prompt", "echo", "suffix", "parse_special"};
const std::set<std::string> kChatOnly = {"messages", "max_completion_tokens", "top_logprobs", "tools",
                                         "tool_choice", "parallel_tool_calls", "add_generation_prompt",
                                         "reasoning_effort", "modalities"};

// `cache` (true, false or {"ttl_s": N}), `session_id`, `locale`, and the response cache's key
// parameters.
std::optional<ApiError> ParseCacheFields(const Json& j, GenRequest* out) {
  if (auto c = j.find("cache"); c != j.end() && !c->is_null()) {
    if (c->is_boolean()) {
      out->cache_asked = c->get<bool>();
      out->cache_refused = !c->get<bool>();
    } else if (c->is_object()) {
      for (auto k = c->begin(); k != c->end(); ++k)
        if (k.key() != "ttl_s") return BadRequest("cache." + k.key(), "Unrecognized cache option: " + k.key(), "unknown_parameter");
      out->cache_asked = true;
      if (auto t = c->find("ttl_s"); t != c->end()) {
        if (!t->is_number() || !(t->get<double>() > 0)) return BadRequest("cache.ttl_s", "'cache.ttl_s' must be a number > 0", "invalid_value");
        out->cache_ttl_s = t->get<double>();
      }
    } else {
      return WrongType("cache", "a boolean or an object", *c);
    }
  }
  auto token = [&](const char* key, size_t max, const char* extra, std::string* v) -> std::optional<ApiError> {
    if (auto e = GetString(j, key, v)) return e;
    if (!j.contains(key)) return std::nullopt;
    if (v->empty() || v->size() > max)
      return BadRequest(key, fmt::format("'{}' must be 1 to {} bytes", key, max), "invalid_value");
    for (char ch : *v)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && !std::strchr(extra, ch))
        return BadRequest(key, fmt::format("'{}' may hold only letters, digits and '{}'", key, extra), "invalid_value");
    return std::nullopt;
  };
  if (auto e = token("session_id", 128, "-_.:", &out->session_id)) return e;
  if (auto e = token("locale", 35, "-_", &out->locale)) return e;
  Json key = Json::object();
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kNotInKey.count(it.key())) key[it.key()] = *it;
  out->key_params = nlohmann::json::parse(key.dump());  // sorted keys at every level: canonical
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseGenRequest(std::string_view body, ApiKind kind, GenRequest* out,
                                        const ParseDefaults& defaults) {
  Json j;
  if (auto e = ParseJsonObject(body, &j)) return e;
  out->kind = kind;
  out->spec.chat = kind == ApiKind::kChat;
  std::set<std::string> known = kCommonFields;
  known.insert((kind == ApiKind::kChat ? kChatOnly : kCompletionOnly).begin(),
               (kind == ApiKind::kChat ? kChatOnly : kCompletionOnly).end());
  if (auto e = CheckKnown(j, known)) return e;
  if (auto e = CheckInertFields(j)) return e;
  if (auto e = ParseModel(j, &out->model)) return e;
  if (kind == ApiKind::kCompletion) {
    if (auto e = ParsePrompt(j, &out->spec.prompts)) return e;
    if (auto e = GetBool(j, "echo", &out->echo)) return e;
    if (auto e = GetBool(j, "parse_special", &out->spec.parse_special)) return e;
    out->parse_special_given = j.contains("parse_special") && !j["parse_special"].is_null();
    std::string suffix;
    if (auto e = GetString(j, "suffix", &suffix)) return e;
    if (!suffix.empty()) return BadRequest("suffix", "'suffix' is not supported", "unsupported_parameter");
  } else {
    if (auto e = ParseMessages(j, &out->spec.messages)) return e;
    if (auto e = ParseToolUse(j, defaults.json_max_whitespace, &out->spec.tool_use, &out->spec.tools)) return e;
    if (auto e = GetBool(j, "add_generation_prompt", &out->spec.add_generation_prompt)) return e;
  }
  if (auto e = ParseStructuredOutput(j, defaults.json_max_whitespace, &out->spec.grammar)) return e;
  if (out->spec.grammar && out->spec.tool_use.parsed())
    return BadRequest("response_format", "a constrained output ('response_format' or 'structured_outputs') cannot be combined "
                                         "with tool calls; set 'tool_choice' to 'none' to pass the tools anyway", "invalid_value");
  int64_t v = 0;
  bool has = false;
  if (auto e = GetInt(j, "max_tokens", 1, 1 << 24, &v, &has)) return e;
  if (has) out->spec.max_tokens = static_cast<int32_t>(v);
  if (kind == ApiKind::kChat) {
    has = false;
    if (auto e = GetInt(j, "max_completion_tokens", 1, 1 << 24, &v, &has)) return e;
    if (has) out->spec.max_tokens = static_cast<int32_t>(v);
  }
  v = 1;
  if (auto e = GetInt(j, "n", 1, kMaxN, &v)) return e;
  out->spec.n = static_cast<int32_t>(v);
  int64_t best_of = out->spec.n;
  if (auto e = GetInt(j, "best_of", 1, kMaxN, &best_of)) return e;
  if (best_of != out->spec.n) return BadRequest("best_of", "'best_of' different from 'n' is not supported", "unsupported_parameter");

  sampling::SamplingParams& sp = out->spec.sampling;
  if (auto e = GetFloat(j, "temperature", 0, 2, &sp.temperature)) return e;
  if (auto e = GetFloat(j, "top_p", 0, 1, &sp.top_p)) return e;
  if (j.contains("top_p") && j["top_p"].is_number() && !(sp.top_p > 0))
    return OutOfRange("top_p", "must be in (0, 1], got " + j["top_p"].dump());
  v = 0;
  if (auto e = GetInt(j, "top_k", -1, 1 << 20, &v)) return e;
  sp.top_k = v < 0 ? 0 : static_cast<int32_t>(v);  // -1 means off (vLLM)
  if (auto e = GetFloat(j, "min_p", 0, 1, &sp.min_p)) return e;
  if (auto e = GetFloat(j, "presence_penalty", -2, 2, &sp.presence_penalty)) return e;
  if (auto e = GetFloat(j, "frequency_penalty", -2, 2, &sp.frequency_penalty)) return e;
  if (auto e = GetFloat(j, "repetition_penalty", 0, 10, &sp.repetition_penalty)) return e;
  if (!(sp.repetition_penalty > 0)) return OutOfRange("repetition_penalty", "must be > 0");
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    // A signed 64-bit integer, as OpenAI and vLLM take it (larger ones arrive unsigned or as
    // doubles).
    if (!it->is_number_integer() && !it->is_number_unsigned() && !it->is_number_float()) return WrongType("seed", "an integer", *it);
    const bool in_range = it->is_number_unsigned() ? it->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX) : it->is_number_integer();
    if (!in_range)
      return OutOfRange("seed", "must be an integer in [" + std::to_string(INT64_MIN) + ", " + std::to_string(INT64_MAX) +
                                    "], got " + it->dump());
    sp.seed = static_cast<uint64_t>(it->get<int64_t>());
  }
  if (auto e = ParseLogitBias(j, &sp)) return e;
  if (auto e = ParseStop(j, &out->spec.stop)) return e;
  if (auto it = j.find("stop_token_ids"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return WrongType("stop_token_ids", "an array of token ids", *it);
    if (it->size() > 256) return BadRequest("stop_token_ids", "'stop_token_ids' holds more than 256 ids", "invalid_value");
    if (auto e = ParseIdArray(*it, "stop_token_ids", &out->spec.stop_token_ids)) return e;
  }
  if (auto e = GetBool(j, "ignore_eos", &out->spec.ignore_eos)) return e;
  if (auto e = GetBool(j, "stream", &out->stream)) return e;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return WrongType("stream_options", "an object", *it);
    for (auto k = it->begin(); k != it->end(); ++k) {
      if (k.key() != "include_usage" && k.key() != "continuous_usage_stats")
        return BadRequest("stream_options." + k.key(), "Unrecognized stream option: " + k.key(), "unknown_parameter");
    }
    if (auto iu = it->find("include_usage"); iu != it->end() && !iu->is_null()) {
      if (!iu->is_boolean()) return WrongType("stream_options.include_usage", "a boolean", *iu);
      out->include_usage = iu->get<bool>();
    }
    if (auto cu = it->find("continuous_usage_stats"); cu != it->end() && !cu->is_null()) {
      if (!cu->is_boolean()) return WrongType("stream_options.continuous_usage_stats", "a boolean", *cu);
      out->continuous_usage = cu->get<bool>();
      if (out->continuous_usage && !out->include_usage)
        return BadRequest("stream_options.continuous_usage_stats",
                          "'stream_options.continuous_usage_stats' needs 'stream_options.include_usage' set to true", "invalid_value");
    }
    if (!out->stream) return BadRequest("stream_options", "'stream_options' is only allowed when 'stream' is true", "invalid_value");
  }
  // logprobs: a boolean (chat, with top_logprobs) or an integer 0..20 (completions).
  if (kind == ApiKind::kChat) {
    if (auto e = GetBool(j, "logprobs", &out->logprobs)) return e;
    v = 0;
    if (auto e = GetInt(j, "top_logprobs", 0, 20, &v)) return e;
    if (v > 0 && !out->logprobs)
      return BadRequest("top_logprobs", "'top_logprobs' needs 'logprobs' set to true", "invalid_value");
    sp.top_logprobs = static_cast<int32_t>(v);
  } else if (auto it = j.find("logprobs"); it != j.end() && !it->is_null()) {
    v = 0;
    if (auto e = GetInt(j, "logprobs", 0, 20, &v)) return e;
    out->logprobs = true;
    sp.top_logprobs = static_cast<int32_t>(v);
  }
  if (out->echo && out->logprobs) out->spec.prompt_logprobs = sp.top_logprobs;
  if (auto e = GetString(j, "user", &out->user)) return e;
  if (out->user.size() > 256) return BadRequest("user", "'user' must be at most 256 bytes", "invalid_value");
  v = 0;
  if (auto e = GetInt(j, "priority", -1000000, 1000000, &v)) return e;
  out->spec.priority = static_cast<int32_t>(v);
  if (auto e = GetBool(j, "speculative", &out->spec.speculative)) return e;
  if (auto e = GetName(j, "task", &out->spec.task)) return e;
  if (auto e = GetName(j, "sla", &out->spec.sla)) return e;
  std::string risk;
  if (auto e = GetString(j, "risk", &risk)) return e;
  if (!risk.empty()) {
    auto r = metrics::ParseRisk(risk);
    if (!r.ok()) return BadRequest("risk", "'risk' must be 'low' or 'high', got '" + risk + "'", "invalid_value");
    out->spec.risk = *r;
    out->spec.risk_given = true;
  }
  if (auto e = ParseCacheFields(j, out)) return e;
  out->spec.streaming = out->stream;
  // What routing rules match against: the last user message, or the first text prompt.
  if (kind == ApiKind::kChat) {
    for (const Json& m : out->spec.messages)
      if (m["role"] == "user") out->spec.last_user_message = m["content"].get<std::string>();
  } else if (!out->spec.prompts.empty() && !out->spec.prompts[0].is_ids) {
    out->spec.last_user_message = out->spec.prompts[0].text;
  }
  return std::nullopt;
}

std::optional<ApiError> ParseTokenizeRequest(std::string_view body, TokenizeRequest* out) {
  Json j;
  if (auto e = ParseJsonObject(body, &j)) return e;
  if (auto e = CheckKnown(j, {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt", "parse_special"}))
    return e;
  if (auto e = ParseModel(j, &out->model)) return e;
  if (j.contains("messages")) {
    if (j.contains("prompt")) return BadRequest("prompt", "give either 'prompt' or 'messages', not both", "invalid_value");
    out->is_chat = true;
    if (auto e = ParseMessages(j, &out->messages)) return e;
  } else {
    auto it = j.find("prompt");
    if (it == j.end() || it->is_null()) return BadRequest("prompt", "'prompt' (or 'messages') is required", "missing_required_parameter");
    if (!it->is_string()) return WrongType("prompt", "a string", *it);
    out->prompt = it->get<std::string>();
  }
  if (auto e = GetBool(j, "add_special_tokens", &out->add_special_tokens)) return e;
  if (j.contains("parse_special") && !j["parse_special"].is_null()) {
    bool ps = true;
    if (auto e = GetBool(j, "parse_special", &ps)) return e;
    out->parse_special = ps;
  }
  if (auto e = GetBool(j, "add_generation_prompt", &out->add_generation_prompt)) return e;
  return std::nullopt;
}

std::optional<ApiError> ParseFeedbackRequest(std::string_view body, FeedbackRequest* out) {
  Json j;
  if (auto e = ParseJsonObject(body, &j)) return e;
  if (auto e = CheckKnown(j, {"id", "score"})) return e;
  auto id = j.find("id");
  if (id == j.end() || id->is_null()) return BadRequest("id", "'id' is required (a routed response's id)", "missing_required_parameter");
  if (!id->is_string()) return WrongType("id", "a string", *id);
  out->id = id->get<std::string>();
  if (out->id.empty() || out->id.size() > 256) return BadRequest("id", "'id' must be 1 to 256 bytes", "invalid_value");
  auto sc = j.find("score");
  if (sc == j.end() || sc->is_null()) return BadRequest("score", "'score' is required (a number in [0, 1])", "missing_required_parameter");
  if (auto e = GetDouble(j, "score", 0, 1, &out->score)) return e;
  return std::nullopt;
}

std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, DetokenizeRequest* out) {
  Json j;
  if (auto e = ParseJsonObject(body, &j)) return e;
  if (auto e = CheckKnown(j, {"model", "tokens"})) return e;
  if (auto e = ParseModel(j, &out->model)) return e;
  auto it = j.find("tokens");
  if (it == j.end() || it->is_null()) return BadRequest("tokens", "'tokens' is required", "missing_required_parameter");
  if (!it->is_array()) return WrongType("tokens", "an array of token ids", *it);
  return ParseIdArray(*it, "tokens", &out->tokens);
}

}  // namespace tarmac::server
