// The request parser as the server configures it (server/http_request_parser.h): the header
// limit gives header_limit (431), the body limit body_limit (413) for Content-Length and for
// chunked bodies alike, and pipelined requests parse one after another from one buffer.
#include "server/http_request_parser.h"

#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <gtest/gtest.h>

#include "server/http_server.h"

namespace tarmac::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;

// Reads requests from `bytes` as a session does (header, then body) until an error or EOF;
// returns the error of the last read and the bodies read.
beast::error_code ReadAll(const std::string& bytes, int64_t body_limit, std::vector<std::string>* bodies) {
  boost::asio::io_context ioc;
  beast::test::stream client(ioc), server(ioc);
  client.connect(server);
  server.read_size(7);  // split everything across reads
  server.append(beast::string_view(bytes.data(), bytes.size()));
  client.close();
  beast::flat_buffer buf;
  for (;;) {
    RequestParser p;
    ConfigureRequestParser(p, body_limit);
    beast::error_code ec;
    http::read_header(server, buf, p, ec);
    if (!ec && !p.is_done()) http::read(server, buf, p, ec);
    if (ec) return ec;
    bodies->push_back(p.get().body());
  }
}

TEST(HttpRequestParser, HeaderLimit) {
  std::vector<std::string> bodies;
  const std::string big = "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(kMaxHeaderBytes, 'a') + "\r\n\r\n";
  EXPECT_EQ(ReadAll(big, 1 << 20, &bodies), http::error::header_limit);
  const std::string fits = "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(kMaxHeaderBytes - 100, 'a') + "\r\n\r\n";
  EXPECT_EQ(ReadAll(fits, 1 << 20, &bodies), http::error::end_of_stream);
  EXPECT_EQ(bodies.size(), 1u);
}

TEST(HttpRequestParser, BodyLimitForLengthAndChunked) {
  std::vector<std::string> bodies;
  EXPECT_EQ(ReadAll("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world", 10, &bodies),
            http::error::body_limit);
  EXPECT_EQ(ReadAll("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n", 10,
                    &bodies),
            http::error::body_limit);
  EXPECT_TRUE(bodies.empty());
}

TEST(HttpRequestParser, PipelinedRequests) {
  std::vector<std::string> bodies;
  const std::string two =
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
  EXPECT_EQ(ReadAll(two, 1 << 20, &bodies), http::error::end_of_stream);
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[0], "{}");
  EXPECT_EQ(bodies[1], "abc");
}

TEST(HttpRequestParser, ServerRejectsANonPositiveBodyLimit) {
  ServerConfig c;
  c.port = 0;
  c.max_body_bytes = 0;
  auto s = Server::Create(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--max-body-bytes"), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace tarmac::server
