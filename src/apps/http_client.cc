#include "apps/http_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

namespace tarmac::apps {

bool ParseHttpUrl(const std::string& url, HttpTarget* t) {
  std::string u = url;
  if (u.rfind("http://", 0) == 0) u = u.substr(7);
  else if (u.find("://") != std::string::npos) return false;
  if (auto s = u.find('/'); s != std::string::npos) u.resize(s);
  auto c = u.rfind(':');
  t->host = c == std::string::npos ? u : u.substr(0, c);
  t->port = c == std::string::npos ? "80" : u.substr(c + 1);
  return !t->host.empty();
}

int DialHttp(const HttpTarget& t, double timeout_s) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(t.host.c_str(), t.port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* p = res; p; p = p->ai_next) {
    fd = ::socket(p->ai_family, p->ai_socktype, p->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, p->ai_addr, p->ai_addrlen) == 0) break;
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    timeval tv{static_cast<time_t>(timeout_s), 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  return fd;
}

std::pair<int, std::string> HttpGet(const HttpTarget& t, const std::string& path, const std::string& api_key,
                                    double timeout_s) {
  int fd = DialHttp(t, timeout_s);
  if (fd < 0) return {0, ""};
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + t.host + "\r\nConnection: close\r\n";
  if (!api_key.empty()) req += "Authorization: Bearer " + api_key + "\r\n";
  req += "\r\n";
  (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[16384];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  auto e = raw.find("\r\n\r\n");
  if (raw.size() < 12 || e == std::string::npos) return {0, ""};
  return {std::atoi(raw.c_str() + 9), raw.substr(e + 4)};
}

}  // namespace tarmac::apps
