#include "server/cors.h"

namespace tarmac::server {

std::string CorsPolicy::AllowOrigin(std::string_view origin) const {
  if (origin.empty()) return "";
  for (const std::string& o : origins_) {
    if (o == "*") return "*";
    if (o == origin) return o;
  }
  return "";
}

std::string CorsPolicy::ResponseHeaders(const std::string& allow_origin) {
  if (allow_origin.empty()) return "";
  std::string h = "Access-Control-Allow-Origin: " + allow_origin + "\r\n";
  if (allow_origin != "*") h += "Vary: Origin\r\n";
  return h + "Access-Control-Expose-Headers: x-tarmac-route, x-tarmac-cache, Retry-After\r\n";
}

std::vector<std::pair<std::string, std::string>> CorsPolicy::PreflightHeaders(const std::string& methods,
                                                                              std::string_view requested_headers) {
  // The openai client sends Authorization, Content-Type and its own x-stainless-* headers:
  // whatever the browser asks for may come.
  return {{"Access-Control-Allow-Methods", methods},
          {"Access-Control-Allow-Headers",
           requested_headers.empty() ? std::string("Authorization, Content-Type") : std::string(requested_headers)},
          {"Access-Control-Max-Age", "600"}};
}

}  // namespace tarmac::server
