// A blocking HTTP/1.1 client for the fleet benchmark: one connection per request
// (Connection: close) to a loopback port, chunked bodies de-chunked. For streamed completions
// it notes when the first SSE event (the first token) arrived. FirstSample reads a scraped
// metric.
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

// The value of the first sample of `family` in Prometheus text (the series the endpoint picker
// reads), or -1 when there is none.
double FirstSample(const std::string& text, const std::string& family);

}  // namespace tarmac::bench
