#include "server/json_fields.h"

#include <cmath>

#include <fmt/format.h>

namespace tarmac::server {

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
                               bool* present) {
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

std::optional<ApiError> CheckKnown(const Json& j, const std::set<std::string>& known, const std::string& prefix) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!known.count(it.key()))
      return BadRequest(prefix + it.key(), "Unrecognized request argument supplied: " + prefix + it.key(), "unknown_parameter");
  }
  return std::nullopt;
}

}  // namespace tarmac::server
