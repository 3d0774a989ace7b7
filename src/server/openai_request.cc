#include "server/openai_request.h"

#include <cstring>

#include <cmath>
#include <limits>
#include <cctype>
#include <set>

namespace tarmac::server {
namespace {

using Json = nlohmann::ordered_json;

const char* TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    case Json::value_t::number_float: return "number";
    default: return "integer";
  }
}

ApiError WrongType(const std::string& param, const char* want, const Json& v) {
  return BadRequest(param, "'" + param + "' must be " + want + ", got " + TypeName(v), "invalid_type");
}

ApiError OutOfRange(const std::string& param, const std::string& what) {
  return BadRequest(param, "'" + param + "' " + what, "invalid_value");
}

// Reads an optional field; absent or null leaves *out unchanged.
std::optional<ApiError> GetBool(const Json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return WrongType(key, "a boolean", *it);
  *out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> GetInt(const Json& j, const char* key, int64_t lo, int64_t hi, int64_t* out,
                               bool* present = nullptr) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    // 3.0 is accepted as 3, as Python's pydantic does; 3.5 is not.
    if (it->is_number_float()) {
      const double d = it->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
        const int64_t v = static_cast<int64_t>(d);
        if (v < lo || v > hi)
          return OutOfRange(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
        *out = v;
        if (present) *present = true;
        return std::nullopt;
      }
    }
    return WrongType(key, "an integer", *it);
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi))
    return OutOfRange(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + it->dump());
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi)
    return OutOfRange(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  *out = v;
  if (present) *present = true;
  return std::nullopt;
}

std::optional<ApiError> GetFloat(const Json& j, const char* key, double lo, double hi, float* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return WrongType(key, "a number", *it);
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return OutOfRange(key, "must be in [" + fmt::format("{}", lo) + ", " + fmt::format("{}", hi) +
                               "], got " + it->dump());
  }
  *out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<ApiError> GetDouble(const Json& j, const char* key, double lo, double hi, double* out) {
  float f = 0;
  if (auto e = GetFloat(j, key, lo, hi, &f)) return e;
  auto it = j.find(key);
  if (it != j.end() && it->is_number()) *out = it->get<double>();
  return std::nullopt;
}

std::optional<ApiError> GetString(const Json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return WrongType(key, "a string", *it);
  *out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> ParseJsonObject(std::string_view body, Json* out) {
  // The parser itself is iterative, but copying or walking a value recurses: values nested
  // deeper than kMaxJsonDepth are dropped while parsing and the request refused.
  bool too_deep = false;
  auto limit = [&too_deep](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  try {
    *out = Json::parse(body, limit);
  } catch (const nlohmann::json::exception& e) {
    return BadRequest("", std::string("the request body is not valid JSON: ") + e.what(), "invalid_json");
  }
  if (too_deep) {
    *out = nullptr;
    return BadRequest("", "the request body nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels", "invalid_json");
  }
  if (!out->is_object()) return BadRequest("", "the request body must be a JSON object", "invalid_json");
  return std::nullopt;
}

std::optional<ApiError> CheckKnown(const Json& j, const std::set<std::string>& known) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!known.count(it.key()))
      return BadRequest(it.key(), "Unrecognized request argument supplied: " + it.key(), "unknown_parameter");
  }
  return std::nullopt;
}

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

// Validates messages and flattens content parts to strings.
std::optional<ApiError> ParseMessages(const Json& j, Json* out) {
  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return BadRequest("messages", "'messages' is required", "missing_required_parameter");
  if (!it->is_array()) return WrongType("messages", "an array", *it);
  if (it->empty()) return BadRequest("messages", "'messages' must not be empty", "invalid_value");
  if (it->size() > static_cast<size_t>(kMaxMessages))
    return BadRequest("messages", "'messages' holds more than " + std::to_string(kMaxMessages) + " messages", "invalid_value");
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool", "function"};
  *out = Json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return BadRequest(param, "'" + param + "' must be an object", "invalid_type");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return BadRequest(param + ".role", "'" + param + ".role' is required and must be a string", "invalid_value");
    if (!kRoles.count(role->get<std::string>()))
      return BadRequest(param + ".role", "'" + param + ".role' must be one of system, developer, user, assistant, tool; got '" +
                                             role->get<std::string>() + "'", "invalid_value");
    Json msg = m;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (role->get<std::string>() != "assistant")
        return BadRequest(param + ".content", "'" + param + ".content' is required", "missing_required_parameter");
      msg["content"] = "";
    } else if (content->is_array()) {
      std::string text;
      for (size_t k = 0; k < content->size(); ++k) {
        const Json& part = (*content)[k];
        const std::string pp = param + ".content[" + std::to_string(k) + "]";
        if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
          return BadRequest(pp, "'" + pp + "' must be an object with a 'type'", "invalid_type");
        if (part["type"] != "text")
          return BadRequest(pp + ".type", "content parts of type '" + part["type"].get<std::string>() +
                                              "' are not supported (text only)", "invalid_value");
        if (!part.contains("text") || !part["text"].is_string())
          return BadRequest(pp + ".text", "'" + pp + ".text' must be a string", "invalid_type");
        text += part["text"].get<std::string>();
      }
      msg["content"] = text;
    } else if (!content->is_string()) {
      return BadRequest(param + ".content", "'" + param + ".content' must be a string or an array of content parts, got " +
                                                TypeName(*content), "invalid_type");
    }
    out->push_back(std::move(msg));
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

const std::set<std::string> kCommonFields = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "stop", "seed", "stream",
    "stream_options", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias", "user",
    "priority", "logprobs", "stop_token_ids", "ignore_eos", "best_of", "service_tier", "metadata", "store",
    "speculative", "task", "sla", "risk", "cache", "session_id", "locale"};
// Fields that never change what is generated (or enter the response cache's key elsewhere:
// the prompt as token ids, the model in the scope).
const std::set<std::string> kNotInKey = {"model", "prompt", "messages", "stream", "stream_options", "user",
                                         "cache", "session_id", "locale"};
const std::set<std::string> kCompletionOnly = {"prompt", "echo", "suffix"};
const std::set<std::string> kChatOnly = {"messages", "max_completion_tokens", "top_logprobs", "tools",
                                         "tool_choice", "parallel_tool_calls", "response_format",
                                         "add_generation_prompt", "reasoning_effort", "modalities"};

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

std::optional<ApiError> ParseGenRequest(std::string_view body, ApiKind kind, GenRequest* out) {
  Json j;
  if (auto e = ParseJsonObject(body, &j)) return e;
  out->kind = kind;
  out->spec.chat = kind == ApiKind::kChat;
  std::set<std::string> known = kCommonFields;
  known.insert((kind == ApiKind::kChat ? kChatOnly : kCompletionOnly).begin(),
               (kind == ApiKind::kChat ? kChatOnly : kCompletionOnly).end());
  if (auto e = CheckKnown(j, known)) return e;
  if (auto e = ParseModel(j, &out->model)) return e;
  if (kind == ApiKind::kCompletion) {
    if (auto e = ParsePrompt(j, &out->spec.prompts)) return e;
    bool echo = false;
    if (auto e = GetBool(j, "echo", &echo)) return e;
    if (echo) return BadRequest("echo", "'echo' is not supported", "unsupported_parameter");
    std::string suffix;
    if (auto e = GetString(j, "suffix", &suffix)) return e;
    if (!suffix.empty()) return BadRequest("suffix", "'suffix' is not supported", "unsupported_parameter");
  } else {
    if (auto e = ParseMessages(j, &out->spec.messages)) return e;
    if (auto t = j.find("tools"); t != j.end() && !t->is_null()) {
      if (!t->is_array()) return WrongType("tools", "an array", *t);
      out->spec.tools = *t;
    }
    if (auto e = GetBool(j, "add_generation_prompt", &out->spec.add_generation_prompt)) return e;
    if (auto rf = j.find("response_format"); rf != j.end() && !rf->is_null()) {
      if (!rf->is_object() || !rf->contains("type") || (*rf)["type"] != "text")
        return BadRequest("response_format", "only 'response_format' {\"type\": \"text\"} is supported", "unsupported_parameter");
    }
  }
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
    if (!it->is_number_integer() && !it->is_number_unsigned()) return WrongType("seed", "an integer", *it);
    sp.seed = it->is_number_unsigned() ? it->get<uint64_t>() : static_cast<uint64_t>(it->get<int64_t>());
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
  if (auto e = CheckKnown(j, {"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt"})) return e;
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
