// Session: one HTTP/1.1 connection (keep-alive, one request at a time). See server_internal.h.
#include <algorithm>
#include <cstdio>
#include <ctime>

#include "base/clock.h"
#include "server/dashboard_assets.h"
#include "server/server_internal.h"
#include "server/slo_control.h"

namespace tarmac::server {
namespace {

using Json = nlohmann::ordered_json;

std::string Reason(int status) {
  return std::string(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status))));
}

std::string HexChunk(const std::string& data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

// What a generation's response head says beyond its status, as header fields.
std::vector<std::pair<std::string, std::string>> HeadFields(const ResponseHead& head) {
  std::vector<std::pair<std::string, std::string>> f;
  if (head.route) f.emplace_back("x-tarmac-route", RouteHeader(*head.route));
  if (!head.cache_status.empty()) f.emplace_back("x-tarmac-cache", head.cache_status);
  return f;
}

std::chrono::milliseconds Ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

// How long a connection closed after an error with its request body unread keeps reading and
// discarding (nginx's lingering close): the client, still sending, then gets the response
// instead of a reset.
constexpr double kLingerSeconds = 5;

}  // namespace

Session::Session(tcp::socket socket, Server::Impl* srv)
    : socket_(std::move(socket)), srv_(srv), read_timer_(srv->ioc) {
  srv_->open_connections++;
}

Session::~Session() { srv_->open_connections--; }

void Session::DoRead() {
  state_ = State::kReading;
  response_complete_ = false;
  flow_.reset();
  route_.clear();
  request_id_.clear();
  parser_.emplace();
  ConfigureRequestParser(*parser_, srv_->config().max_body_bytes);
  read_timer_.expires_after(Ms(srv_->config().idle_timeout_s));
  read_timer_.async_wait([w = weak_from_this()](const beast::error_code& ec) {
    if (ec) return;
    if (auto s = w.lock(); s && s->state_ == State::kReading) s->Close();
  });
  // Header first: a client that sent "Expect: 100-continue" (curl does for larger bodies)
  // waits for the interim response before it sends the body.
  http::async_read_header(socket_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec || self->state_ == State::kClosed) {
      self->read_timer_.cancel();
      return self->OnRead(ec);
    }
    auto& req = self->parser_->get();
    auto it = req.find(http::field::expect);
    const bool expect_continue = it != req.end() && beast::iequals(it->value(), "100-continue");
    if (!expect_continue || self->parser_->is_done()) return self->ReadBody();
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(self->socket_, asio::buffer(kContinue), [self](beast::error_code wec, size_t) {
      if (wec) return self->Close();
      self->ReadBody();
    });
  });
}

void Session::ReadBody() {
  http::async_read(socket_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->read_timer_.cancel();
    self->OnRead(ec);
  });
}

void Session::OnRead(beast::error_code ec) {
  if (state_ == State::kClosed) return;
  if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
      ec == asio::error::connection_reset) {
    Close();
    return;
  }
  keep_alive_ = true;
  if (ec == http::error::body_limit) {
    keep_alive_ = false;
    linger_ = true;
    route_ = "other";
    RespondError(TooLarge(fmt::format("the request body exceeds the limit of {} bytes (--max-body-bytes)",
                                      srv_->config().max_body_bytes)));
    return;
  }
  if (ec == http::error::header_limit) {
    keep_alive_ = false;
    linger_ = true;
    route_ = "other";
    ApiError e = BadRequest("", "the request headers are too large");
    e.status = 431;
    RespondError(e);
    return;
  }
  if (ec) {
    keep_alive_ = false;
    linger_ = true;
    route_ = "other";
    RespondError(BadRequest("", "malformed HTTP request: " + ec.message(), "bad_request"));
    return;
  }
  arrived_s_ = srv_->Now();
  // Nothing a request contains should throw; if something does, answer 500 and keep serving.
  try {
    Handle();
  } catch (const std::exception& e) {
    InternalError("handling", e);
  }
}

void Session::Handle() {
  state_ = State::kResponding;
  auto& req = parser_->get();
  keep_alive_ = req.keep_alive();
  std::string target(req.target());
  if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
  const http::verb method = req.method();
  SetCors(req);
  SetRequestId(req);
  struct Route {
    const char* path;
    http::verb verb;
  };
  static const Route kRoutes[] = {{"/v1/completions", http::verb::post}, {"/v1/chat/completions", http::verb::post},
                                  {"/v1/models", http::verb::get},      {"/tokenize", http::verb::post},
                                  {"/detokenize", http::verb::post},    {"/health", http::verb::get},
                                  {"/metrics", http::verb::get},        {"/v1/feedback", http::verb::post},
                                  {"/v1/slo", http::verb::get},         {"/ready", http::verb::get},
                                  {"/v1/completions/render", http::verb::post},
                                  {"/v1/chat/completions/render", http::verb::post}};
  const Route* route = nullptr;
  for (const Route& r : kRoutes)
    if (target == r.path) route = &r;
  // The caches' endpoints take several methods each (HandleCacheApi checks them).
  const bool cache_api = target.rfind("/v1/cache/", 0) == 0 || target.rfind("/v1/sessions/", 0) == 0;
  std::string one_model;
  if (!route && target.rfind("/v1/models/", 0) == 0 && target.size() > 11) {
    route = &kRoutes[2];
    one_model = target.substr(11);
  }
  route_ = route ? route->path : !cache_api ? "other" : target.rfind("/v1/cache/", 0) == 0 ? "/v1/cache" : "/v1/sessions";
  if (!route && !cache_api && (target == "/dashboard" || target.rfind("/dashboard/", 0) == 0)) return HandleDashboard(target);
  if (!route && !cache_api) {
    RespondError(NotFound(fmt::format("Invalid URL ({} {})", std::string(req.method_string()), target)));
    return;
  }
  // The routes here take one method each; the caches' endpoints several (HandleCacheApi checks
  // them against CacheApiMethods, which the preflight answers with too).
  const std::string methods = route ? std::string(http::to_string(route->verb)) + (route->verb == http::verb::get ? ", HEAD" : "")
                                    : CacheApiMethods(target);
  const std::string allow = methods + (srv_->cors.enabled() ? ", OPTIONS" : "");
  if (method == http::verb::options && srv_->cors.enabled() && !methods.empty()) return RespondPreflight(req, allow);
  if (route && method != route->verb && !(method == http::verb::head && route->verb == http::verb::get))
    return RespondError(MethodNotAllowed(method, target, allow));
  if (route_ == "/health") {
    if (srv_->draining) return RespondError(Unavailable("the server is draining"));
    if (!srv_->ready) return RespondError(Unavailable("the server is loading models"));
    Respond(200, "application/json", "{\"status\":\"ok\"}");
    return;
  }
  if (route_ == "/ready") return HandleReady();
  if (srv_->draining) {
    keep_alive_ = false;
    srv_->metrics().CountRejected("draining");
    RespondError(Unavailable("the server is shutting down", 1));
    return;
  }
  std::string tenant = "default";
  tenant_ = tenant;
  if (srv_->config().keys) {
    auto it = req.find(http::field::authorization);
    std::string_view key = it == req.end() ? std::string_view() : BearerToken(std::string_view(it->value().data(), it->value().size()));
    if (key.empty()) {
      srv_->metrics().CountRejected("unauthorized");
      RespondError(Unauthorized("missing API key: send 'Authorization: Bearer KEY'"));
      return;
    }
    auto t = srv_->config().keys->Lookup(key);
    if (!t) {
      srv_->metrics().CountRejected("unauthorized");
      RespondError(Unauthorized("incorrect API key provided"));
      return;
    }
    tenant = *t;
    tenant_ = tenant;
  }
  if (route_ == "/metrics") {
    Respond(200, "text/plain; version=0.0.4; charset=utf-8", srv_->RenderMetrics());
    return;
  }
  if (route_ == "/v1/slo") return HandleSlo();
  if (!srv_->ready) return RespondError(Unavailable("the server is loading models", 5));
  if (route_ == "/v1/models") return HandleModels(one_model);
  if (route_ == "/tokenize") return HandleTokenize(false);
  if (route_ == "/detokenize") return HandleTokenize(true);
  if (route_ == "/v1/feedback") return HandleFeedback(tenant);
  if (route_ == "/v1/completions/render") return HandleRender(ApiKind::kCompletion, tenant);
  if (route_ == "/v1/chat/completions/render") return HandleRender(ApiKind::kChat, tenant);
  if (cache_api) return HandleCacheApi(tenant, method, std::string(req.target()));
  HandleGeneration(route_ == "/v1/chat/completions" ? ApiKind::kChat : ApiKind::kCompletion, tenant);
}

// The dashboard's page and files are public (they hold no data): the page asks for a key and
// sends it with its requests to /metrics and /v1/slo, which check it as every route does.
void Session::HandleDashboard(const std::string& target) {
  route_ = "/dashboard";
  auto& req = parser_->get();
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    ApiError e = BadRequest("", fmt::format("method {} is not allowed on {} (use GET)", std::string(req.method_string()), target),
                            "method_not_allowed");
    e.status = 405;
    return RespondError(e);
  }
  const DashboardAsset* a = FindDashboardAsset(target);
  if (!a) return RespondError(NotFound(fmt::format("no dashboard file {} (the page is GET /dashboard)", target)));
  Respond(200, std::string(a->content_type), std::string(a->body),
          {{"Cache-Control", "no-cache"},
           {"X-Content-Type-Options", "nosniff"},
           {"Content-Security-Policy", "default-src 'self'; img-src 'self' data:"}});
}

void Session::HandleGeneration(ApiKind kind, const std::string& tenant) {
  FlowInput in;
  in.kind = kind;
  in.tenant = tenant;
  in.cache_headers = RequestCacheHeaders();
  auto& req = parser_->get();
  if (auto it = req.find("x-tarmac-debug-fault"); it != req.end()) in.debug_fault = std::string(it->value());
  in.body = std::move(req.body());
  in.arrived_s = arrived_s_;
  parser_.reset();  // a long-lived stream must not pin the request
  state_ = State::kWaiting;
  flow_ = std::make_shared<GenerationFlow>(srv_, shared_from_this());
  flow_->Start(std::move(in));
}

void Session::StartStream(const ResponseHead& head) {
  std::string h = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n"
                  "Transfer-Encoding: chunked\r\nConnection: " + std::string(keep_alive_ ? "keep-alive" : "close") + "\r\n";
  for (const auto& [k, v] : HeadFields(head)) h += k + ": " + v + "\r\n";
  h += "x-request-id: " + request_id_ + "\r\n";
  h += CorsHeaders();
  Write(h + "\r\n");
}

void Session::Chunk(const std::string& data) { Write(HexChunk(data)); }

void Session::EndStream(const std::string& tail, int status) {
  state_ = State::kResponding;
  Write(HexChunk(tail) + "0\r\n\r\n");
  srv_->metrics().CountResponse(route_, status);
  ResponseDone();
}

void Session::Respond(const std::string& body, const ResponseHead& head) {
  Respond(200, "application/json", body, HeadFields(head));
}

void Session::Drop(int status) {
  if (status > 0) srv_->metrics().CountResponse(route_, status);
  Close();
}

void Session::WatchDisconnect() {
  if (watching_) return;
  watching_ = true;
  socket_.async_read_some(asio::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->watching_ = false;
    if (self->read_after_watch_) {
      self->read_after_watch_ = false;
      if (n > 0) self->buf_.commit(asio::buffer_copy(self->buf_.prepare(n), asio::buffer(self->watch_buf_, n)));
      if (!ec || ec == asio::error::operation_aborted) return self->DoRead();
      return self->Close();
    }
    if (ec) return self->OnClientGone();
    // Pipelined bytes of the next request: keep them for the next read (bounded).
    self->buf_.commit(asio::buffer_copy(self->buf_.prepare(n), asio::buffer(self->watch_buf_, n)));
    if (self->buf_.size() > static_cast<size_t>(self->srv_->config().max_body_bytes) + 65536) return self->OnClientGone();
    if (self->state_ == State::kWaiting) self->WatchDisconnect();
  });
}

void Session::OnClientGone() {
  if (client_gone_ || state_ == State::kClosed) return;
  client_gone_ = true;
  // An async_write in progress still reads outq_.front(): keep it until it completes.
  while (outq_.size() > (writing_ ? 1u : 0u)) outq_.pop_back();
  if (flow_ && !flow_->ended()) return flow_->ClientGone();  // it drops the answer (Drop)
  if (state_ == State::kWaiting) srv_->metrics().CountRejected("client_gone");  // the work is dropped on return
  Close();
}

void Session::Respond(int status, const std::string& content_type, const std::string& body,
                      const std::vector<std::pair<std::string, std::string>>& extra) {
  state_ = State::kResponding;
  srv_->metrics().CountResponse(route_.empty() ? "other" : route_, status);
  std::string h = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n", status,
                              Reason(status), content_type, body.size(), keep_alive_ ? "keep-alive" : "close");
  for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  if (request_id_.empty()) request_id_ = srv_->NewRequestId();  // failed before Handle (malformed HTTP)
  h += "x-request-id: " + request_id_ + "\r\n";
  h += CorsHeaders();
  h += "\r\n";
  const bool head = parser_ && parser_->is_header_done() && parser_->get().method() == http::verb::head;
  Write(h + (head ? std::string() : body));
  ResponseDone();
}

void Session::RespondError(const ApiError& given) {
  ApiError e = given;
  if (e.status == 500) {  // the server's fault: named in the log and in the answer
    if (request_id_.empty()) request_id_ = srv_->NewRequestId();
    e.message += " (request id " + request_id_ + ")";
    std::fprintf(stderr, "tarmac serve: request %s %s: %d %s\n", request_id_.c_str(), route_.c_str(), e.status,
                 e.message.c_str());
  }
  std::vector<std::pair<std::string, std::string>> extra;
  if (e.retry_after_s > 0) extra.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  if (e.status == 401) extra.emplace_back("WWW-Authenticate", "Bearer");
  if (!e.allow.empty()) extra.emplace_back("Allow", e.allow);
  Respond(e.status, "application/json", e.ToJson(), extra);
}

void Session::ResponseDone() {
  response_complete_ = true;
  if (!writing_ && outq_.empty()) DoWrite();  // nothing pending: go on at once
}

void Session::Write(std::string bytes) {
  if (client_gone_ || state_ == State::kClosed) return;
  outq_.push_back(std::move(bytes));
  if (!writing_) DoWrite();
}

void Session::DoWrite() {
  if (outq_.empty()) {
    if (!response_complete_ || state_ == State::kClosed) return;
    response_complete_ = false;
    if (!keep_alive_) return linger_ ? Linger() : Close();
    if (watching_) {  // stop the disconnect watch, then read the next request
      read_after_watch_ = true;
      beast::error_code ec;
      socket_.cancel(ec);
      return;
    }
    return DoRead();
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(outq_.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
    self->writing_ = false;
    if (ec) return self->OnClientGone();
    if (!self->outq_.empty()) self->outq_.pop_front();
    self->DoWrite();
  });
}

void Session::Linger() {
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);  // the response is complete: FIN
  if (ec) return Close();
  state_ = State::kLingering;
  read_timer_.expires_after(Ms(kLingerSeconds));
  read_timer_.async_wait([w = weak_from_this()](const beast::error_code& tec) {
    if (tec) return;
    if (auto s = w.lock(); s && s->state_ == State::kLingering) s->Close();
  });
  DiscardInput();
}

void Session::DiscardInput() {
  socket_.async_read_some(asio::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
    if (self->state_ != State::kLingering) return;
    if (ec) return self->Close();  // the client closed its side (or went away)
    self->DiscardInput();
  });
}

void Session::SetCors(const http::request<http::string_body>& req) {
  auto it = req.find(http::field::origin);
  cors_origin_ = it == req.end() ? "" : srv_->cors.AllowOrigin(std::string_view(it->value().data(), it->value().size()));
}

std::string Session::CorsHeaders() const { return CorsPolicy::ResponseHeaders(cors_origin_); }

void Session::RespondPreflight(const http::request<http::string_body>& req, const std::string& allow) {
  auto h = req.find(http::field::access_control_request_headers);
  Respond(204, "text/plain", "",
          CorsPolicy::PreflightHeaders(allow, h == req.end() ? std::string_view() : std::string_view(h->value().data(), h->value().size())));
}

void Session::Close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  read_timer_.cancel();
  beast::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

}  // namespace tarmac::server
