// Reading fields of a request's JSON body with OpenAI-style 400s: each error names the field
// (`param`) and says what was expected. Shared by the request parsers (openai_request.cc,
// openai_tools.cc, openai_structured.cc). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace tarmac::server {

inline constexpr int kMaxJsonDepth = 64;  // nesting of the request body

using Json = nlohmann::ordered_json;

const char* TypeName(const Json& v);  // "null", "boolean", "string", "array", "object", "number", "integer"
ApiError WrongType(const std::string& param, const char* want, const Json& v);
ApiError OutOfRange(const std::string& param, const std::string& what);

// Optional fields: absent or null leaves *out unchanged.
std::optional<ApiError> GetBool(const Json& j, const char* key, bool* out);
// Integers in [lo, hi]; 3.0 is accepted as 3 (as pydantic does), 3.5 is not.
std::optional<ApiError> GetInt(const Json& j, const char* key, int64_t lo, int64_t hi, int64_t* out,
                               bool* present = nullptr);
std::optional<ApiError> GetFloat(const Json& j, const char* key, double lo, double hi, float* out);
std::optional<ApiError> GetDouble(const Json& j, const char* key, double lo, double hi, double* out);
std::optional<ApiError> GetString(const Json& j, const char* key, std::string* out);

// The body as one JSON object nested at most kMaxJsonDepth deep.
std::optional<ApiError> ParseJsonObject(std::string_view body, Json* out);
// Every key of j is in known; else 400 "Unrecognized request argument" naming prefix + key.
std::optional<ApiError> CheckKnown(const Json& j, const std::set<std::string>& known, const std::string& prefix = "");

}  // namespace tarmac::server
