#include "fleet/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"

namespace tarmac::bench {
namespace {

std::string Dechunk(const std::string& s) {
  std::string out;
  size_t p = 0;
  while (p < s.size()) {
    const size_t e = s.find("\r\n", p);
    if (e == std::string::npos) break;
    const size_t n = std::stoul(s.substr(p, e - p), nullptr, 16);
    if (n == 0) break;
    out += s.substr(e + 2, n);
    p = e + 2 + n + 2;
  }
  return out;
}

}  // namespace

HttpReply HttpRequest(int port, const std::string& method, const std::string& path, const std::string& body) {
  HttpReply r;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{300, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (method == "POST") req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  for (size_t off = 0; off < req.size();) {
    const ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return r;
    }
    off += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[65536];
  ssize_t n;
  size_t header_end = std::string::npos;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
    raw.append(buf, static_cast<size_t>(n));
    if (header_end == std::string::npos) header_end = raw.find("\r\n\r\n");
    if (r.first_event_s == 0 && header_end != std::string::npos && raw.find("data:", header_end) != std::string::npos)
      r.first_event_s = NowSeconds();
  }
  ::close(fd);
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || header_end == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  const std::string headers = raw.substr(0, header_end);
  r.body = raw.substr(header_end + 4);
  if (headers.find("Transfer-Encoding: chunked") != std::string::npos) r.body = Dechunk(r.body);
  return r;
}

double FirstSample(const std::string& text, const std::string& family) {
  size_t p = 0;
  while ((p = text.find(family, p)) != std::string::npos) {
    const size_t after = p + family.size();
    if ((p == 0 || text[p - 1] == '\n') && after < text.size() && (text[after] == ' ' || text[after] == '{')) {
      const size_t e = text.find('\n', p);
      const std::string line = text.substr(p, e == std::string::npos ? std::string::npos : e - p);
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    p = after;
  }
  return -1;
}

}  // namespace tarmac::bench
