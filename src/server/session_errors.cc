// Session (server_internal.h): a request's x-request-id, and the 500 it gets when its
// handling throws on the I/O thread.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "server/server_internal.h"

namespace tarmac::server {

void Session::InternalError(const char* where, const std::exception& e) {
  if (flow_ && !flow_->ended()) return flow_->InternalError(where, e);  // the flow has the request
  std::fprintf(stderr, "tarmac serve: request %s: internal error %s %s: %s\n", request_id_.c_str(), where,
               route_.c_str(), e.what());
  if (state_ == State::kClosed) return;
  if (!response_complete_ && outq_.empty() && !writing_) RespondError(ServerError(std::string("internal error: ") + e.what()));
}

void Session::SetRequestId(const http::request<http::string_body>& req) {
  auto it = req.find("x-request-id");
  std::string_view v = it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
  const bool plain = !v.empty() && v.size() <= 128 && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':';
  });
  request_id_ = plain ? std::string(v) : srv_->NewRequestId();
}

}  // namespace tarmac::server
