#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace tarmac::server {

std::string ApiError::ToJson() const {
  nlohmann::ordered_json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param);
  e["code"] = code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code);
  nlohmann::ordered_json j;
  j["error"] = std::move(e);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError BadRequest(std::string param, std::string message, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

ApiError NotFound(std::string message, std::string param, std::string code) {
  ApiError e;
  e.status = 404;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = code.empty() ? "not_found" : std::move(code);
  return e;
}

ApiError Unauthorized(std::string message) {
  ApiError e;
  e.status = 401;
  e.message = std::move(message);
  e.type = "authentication_error";
  e.code = "invalid_api_key";
  return e;
}

ApiError TooLarge(std::string message) {
  ApiError e;
  e.status = 413;
  e.message = std::move(message);
  e.code = "request_too_large";
  return e;
}

ApiError TooManyRequests(std::string message, int retry_after_s, std::string code) {
  ApiError e;
  e.status = 429;
  e.message = std::move(message);
  e.type = "rate_limit_error";
  e.code = std::move(code);
  e.retry_after_s = retry_after_s < 1 ? 1 : retry_after_s;
  return e;
}

ApiError Unavailable(std::string message, int retry_after_s) {
  ApiError e;
  e.status = 503;
  e.message = std::move(message);
  e.type = "service_unavailable";
  e.code = "service_unavailable";
  e.retry_after_s = retry_after_s;
  return e;
}

ApiError ServerError(std::string message) {
  ApiError e;
  e.status = 500;
  e.message = std::move(message);
  e.type = "server_error";
  return e;
}

ApiError FromStatus(const Status& st) {
  if (st.code() == StatusCode::kInvalidArgument)
    return BadRequest(st.field(), st.message(), st.reason().empty() ? "invalid_value" : st.reason());
  if (st.code() == StatusCode::kResourceExhausted) return Unavailable(st.message(), 1);
  return ServerError(st.message());
}

}  // namespace tarmac::server
