// CorsPolicy: which browser origins may call the API (--cors-origin) and the CORS headers that
// say so: on every response to an allowed Origin, and on the answer to a preflight OPTIONS
// (the methods the route takes, the headers the browser asked to send). Immutable; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tarmac::server {

class CorsPolicy {
 public:
  // origins: exact origins ("https://app.example"), or "*" for any. Empty: CORS off.
  explicit CorsPolicy(std::vector<std::string> origins) : origins_(std::move(origins)) {}

  bool enabled() const { return !origins_.empty(); }
  // The Access-Control-Allow-Origin value for a request's Origin ("" when it may not call).
  std::string AllowOrigin(std::string_view origin) const;
  // Header lines ("Name: value\r\n") for a response to an allowed origin ("" for none).
  static std::string ResponseHeaders(const std::string& allow_origin);
  // The preflight answer's extra headers: allowed methods, the requested headers (or the
  // usual two when the browser named none), and how long to cache the answer.
  static std::vector<std::pair<std::string, std::string>> PreflightHeaders(const std::string& methods,
                                                                           std::string_view requested_headers);

 private:
  std::vector<std::string> origins_;
};

}  // namespace tarmac::server
