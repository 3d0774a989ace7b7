// A minimal blocking HTTP/1.1 client for the subcommands that talk to a server (bench serve,
// report): parse a plain http:// URL, connect, GET a path on a connection of its own.
//
// Functions; thread-safe (no shared state).
#pragma once

#include <string>
#include <utility>

namespace tarmac::apps {

struct HttpTarget {
  std::string host, port;
};

// "http://HOST[:PORT][/...]" (or "HOST[:PORT]"); false for another scheme or no host.
bool ParseHttpUrl(const std::string& url, HttpTarget* t);
// A connected socket with a receive timeout, or -1.
int DialHttp(const HttpTarget& t, double timeout_s);
// GET `path` (Connection: close; a bearer key when given): (status, body); status 0 when it
// failed. A chunked body is returned as sent (the servers here answer GETs with a length).
std::pair<int, std::string> HttpGet(const HttpTarget& t, const std::string& path, const std::string& api_key,
                                    double timeout_s);

}  // namespace tarmac::apps
