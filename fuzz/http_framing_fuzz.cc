// libFuzzer target for HTTP/1.1 request framing with Beast's parser as the server configures it
// (server/http_request_parser.h: header and body limits). The input is the byte stream a client
// sends on one connection: requests are read as a session reads them (the header first, then
// the body), one after another while the connection stays open (pipelining, keep-alive), from
// a stream that hands out the bytes in small reads so that every state of the incremental
// parser (split request lines, headers, chunk sizes, chunk extensions, trailers) is reached.
// The first input byte sets the read size (1..64) and the body limit (small, so that the 413
// path is hit too). Any input must parse or end in a Beast error code; nothing may crash, hang
// or leak, and a parsed body never exceeds the limit. Run: scripts/fuzz.sh http_framing SECONDS.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "server/http_request_parser.h"

namespace beast = boost::beast;
namespace http = beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t read_size = 1 + (data[0] & 63);
  const int64_t body_limit = (data[0] & 64) ? 64 : (4 << 20);
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  boost::asio::io_context ioc;
  beast::test::stream client(ioc), server(ioc);
  client.connect(server);
  server.read_size(read_size);
  server.append(beast::string_view(bytes.data(), bytes.size()));
  client.close();  // the client's end: the server sees EOF after the bytes

  beast::flat_buffer buf;
  for (int requests = 0; requests < 1000; ++requests) {
    tarmac::server::RequestParser parser;
    tarmac::server::ConfigureRequestParser(parser, body_limit);
    beast::error_code ec;
    http::read_header(server, buf, parser, ec);
    if (!ec && !parser.is_done()) http::read(server, buf, parser, ec);
    if (ec) return 0;  // the session answers 4xx (or closes) and stops reading
    const auto& req = parser.get();
    if (req.body().size() > static_cast<size_t>(body_limit)) {
      std::fprintf(stderr, "http fuzz: body of %zu bytes over the limit %lld\n", req.body().size(),
                   static_cast<long long>(body_limit));
      std::abort();
    }
    // What a session reads from every request.
    (void)req.method();
    (void)req.target();
    (void)req.find(http::field::expect);
    (void)req.find(http::field::authorization);
    if (!req.keep_alive()) return 0;
  }
  return 0;
}
