// Session (server_internal.h): a request's x-request-id, the 500 it gets when its handling
// throws on the I/O thread, and the test-only fault header.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/clock.h"
#include "server/server_internal.h"

namespace tarmac::server {

void Session::InternalError(const char* where, const std::exception& e) {
  std::fprintf(stderr, "tarmac serve: request %s: internal error %s %s: %s\n", request_id_.c_str(), where,
               route_.c_str(), e.what());
  if (state_ == State::kClosed) return;
  if (gen_ && state_ == State::kResponding) {  // prepared, never admitted or started
    gen_timer_.cancel();
    srv_->tenant_limiter.Release(gen_id_, 0, NowSeconds());
    gen_.reset();
  }
  pending_.reset();
  if (state_ == State::kResponding && !gen_ && !response_complete_ && outq_.empty() && !writing_)
    RespondError(ServerError(std::string("internal error: ") + e.what()));
}

void Session::SetRequestId(const http::request<http::string_body>& req) {
  auto it = req.find("x-request-id");
  std::string_view v = it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
  const bool plain = !v.empty() && v.size() <= 128 && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':';
  });
  request_id_ = plain ? std::string(v) : srv_->NewRequestId();
}

std::optional<ApiError> Session::ParseDebugFault(engine::InjectedFault* fault) const {
  const auto& req = parser_->get();
  auto it = req.find("x-tarmac-debug-fault");
  if (it == req.end()) return std::nullopt;
  if (!srv_->config.debug_fault_injection)
    return BadRequest("x-tarmac-debug-fault", "the x-tarmac-debug-fault header is a test aid, refused unless the server "
                                              "runs with --debug-fault-injection");
  auto f = engine::ParseInjectedFault(std::string_view(it->value().data(), it->value().size()));
  if (!f.ok()) return BadRequest("x-tarmac-debug-fault", "x-tarmac-debug-fault: " + f.status().message());
  *fault = *f;
  return std::nullopt;
}

}  // namespace tarmac::server
