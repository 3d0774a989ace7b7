// ApiError: an HTTP error answered in OpenAI's error JSON
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// Plain value type; thread-safe to copy.
#pragma once

#include <string>

#include "base/status.h"

namespace tarmac::server {

struct ApiError {
  int status = 400;            // HTTP status
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;           // "" -> null
  std::string code;            // "" -> null
  int retry_after_s = 0;       // > 0: sent as Retry-After (429, 503)

  std::string ToJson() const;  // the body, one line
};

ApiError BadRequest(std::string param, std::string message, std::string code = "");
ApiError NotFound(std::string message, std::string param = "", std::string code = "");
ApiError Unauthorized(std::string message);
ApiError TooLarge(std::string message);
ApiError TooManyRequests(std::string message, int retry_after_s, std::string code);
ApiError Unavailable(std::string message, int retry_after_s = 0);
ApiError ServerError(std::string message);
// An error Status from below the server as the API answers it: an input error is a 400 whose
// param is the status's field and whose code is its reason ("invalid_value" when none); an
// exhausted resource (a full engine queue, an engine shutting down) is a 503 with Retry-After.
ApiError FromStatus(const Status& st);

}  // namespace tarmac::server
