// A blocking HTTP/1.1 client for the fleet benchmark: one connection per request
// (Connection: close) to a loopback port, chunked bodies de-chunked. For streamed completions
// it notes when the first SSE event (the first token) arrived.
//
// Thread-safe: no shared state.
#pragma once

#include <string>

namespace tarmac::bench {

struct HttpReply {
  int status = 0;          // 0: no answer (connection failed, timed out)
  std::string body;        // de-chunked
  double first_event_s = 0;  // steady-clock seconds when the first "data:" arrived (streams)
};

HttpReply HttpRequest(int port, const std::string& method, const std::string& path, const std::string& body = "");

}  // namespace tarmac::bench
