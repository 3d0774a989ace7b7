// Session (server_internal.h): the work its own endpoints (/tokenize, /render) hand off the I/O
// thread, and what a request's headers say to the caches. The I/O thread never renders a
// template, encodes a prompt or compiles a grammar unless that is cheap (InlineWorkScope), so
// /health and every other connection go on while a costly request prepares.
#include "base/thread_role.h"
#include "server/server_internal.h"

namespace tarmac::server {
namespace {

std::string HeaderOf(const http::request<http::string_body>& req, std::string_view name) {
  auto it = req.find(boost::beast::string_view(name.data(), name.size()));
  return it == req.end() ? std::string() : std::string(it->value());
}

}  // namespace

CacheHeaders Session::RequestCacheHeaders() const {
  CacheHeaders h;
  if (!parser_) return h;
  const auto& req = parser_->get();
  h.policy_version = HeaderOf(req, "x-tarmac-policy-version");
  h.accept_language = HeaderOf(req, "accept-language");
  h.cache_control = HeaderOf(req, "cache-control");
  return h;
}

bool Session::CheapToPrepare(bool constrained) const {
  return !constrained && parser_ && parser_->get().body().size() < kCheapBodyBytes;
}

void Session::OffIoThread(std::function<Then()> work, bool cheap) {
  if (cheap) {
    state_ = State::kResponding;
    Then then;
    {
      InlineWorkScope inline_work;
      then = work();
    }
    return then(this);
  }
  // The continuation holds the session until it ran (a client gone meanwhile: it is dropped).
  auto self = shared_from_this();
  auto job = [self, work = std::move(work)]() -> FlowServices::Continuation {
    FlowServices::Continuation then = CaptureThrow([&]() -> FlowServices::Continuation {
      return [self, then = work()] { then(self.get()); };
    });
    return [self, then = std::move(then)] {
      if (self->state_ == State::kClosed) return;
      self->state_ = State::kResponding;
      try {
        then();
      } catch (const std::exception& e) {
        self->InternalError("preparing", e);
      }
    };
  };
  state_ = State::kWaiting;
  if (auto refused = srv_->OffIoThread(tenant_, std::move(job))) {
    state_ = State::kResponding;
    srv_->metrics().CountRejected("prepare_busy");
    return RespondError(*refused);
  }
  WatchDisconnect();
}

}  // namespace tarmac::server
