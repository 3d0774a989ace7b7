// The HTTP/1.1 request parser exactly as the server configures it for every request on a
// connection (body and header limits). The server's sessions and the HTTP framing fuzzer
// (fuzz/http_framing_fuzz.cc) both take their parser from here, so the fuzzer exercises what
// the server runs. Pure configuration; a parser is owned by one session (not thread-safe).
#pragma once

#include <cstdint>

#include <boost/beast/http.hpp>

namespace tarmac::server {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Request line plus headers; beyond it the server answers 431.
inline constexpr uint32_t kMaxHeaderBytes = 64 * 1024;

// Sets the limits on a freshly constructed parser (one per request: Beast parsers are not
// reusable). Preconditions: max_body_bytes > 0.
void ConfigureRequestParser(RequestParser& parser, int64_t max_body_bytes);

}  // namespace tarmac::server
