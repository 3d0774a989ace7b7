// Internals of Server shared by http_server.cc (listener, routing state, drain),
// server_services.cc (the flows' services) and http_session.cc (one connection). Everything
// here runs on the server's single I/O thread unless stated otherwise.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>  // before Asio: boost 1.74 awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "base/work_queue.h"
#include "cache/cache_service.h"
#include "cache/recorded_response.h"
#include "router/model_pool.h"
#include "server/api_error.h"
#include "server/cors.h"
#include "server/flow_registry.h"
#include "server/flow_services.h"
#include "server/generation_flow.h"
#include "server/http_request_parser.h"
#include "server/http_server.h"
#include "server/server_cache.h"
#include "server/server_metrics.h"
#include "server/slo_control.h"

namespace tarmac::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Session;

// The server's state, and the FlowServices its generation flows run on.
struct Server::Impl final : FlowServices {
  explicit Impl(ServerConfig c)
      : config_(std::move(c)), acceptor(ioc), signals(ioc, SIGTERM, SIGINT), drain_timer(ioc),
        pool_(config_.admission, config_.metrics),
        limiter_(config_.rate_limit_rps, config_.rate_limit_burst > 0 ? config_.rate_limit_burst : std::max(1.0, config_.rate_limit_rps)),
        tenant_limiter_(config_.tenant_limit, config_.tenant_limits),
        metrics_(config_.metrics), cors(config_.cors_origins),
        flows(&pool_.admission(), &tenant_limiter_, [this](std::function<void()> fn) { Post(std::move(fn)); }),
        preparer(std::make_unique<WorkQueue>(config_.prepare_threads, static_cast<size_t>(config_.prepare_queue),
                                             WorkQueue::OnStop::kDropQueued, config_.prepare_nice)) {
    metrics_.Watch(&pool_.admission(), &open_connections, &preparing);
  }

  // FlowServices (server_services.cc).
  const ServerConfig& config() const override { return config_; }
  router::ModelPool& pool() override { return pool_; }
  router::Router* router() override { return router_.get(); }
  const std::shared_ptr<cache::CacheService>& caches() override { return caches_; }
  RateLimiter& limiter() override { return limiter_; }
  TenantLimiter& tenant_limiter() override { return tenant_limiter_; }
  ServerMetrics& metrics() override { return metrics_; }
  double Now() const override;
  std::optional<ApiError> OffIoThread(const std::string& tenant, std::function<Continuation()> work) override;
  void Post(std::function<void()> fn) override;
  std::function<void()> ArmTimer(double at_s, std::function<void()> fire) override;
  int64_t NextGenerationId() override { return flows.NextId(); }
  void Track(int64_t id, std::shared_ptr<GenerationFlow> flow) override { flows.Track(id, std::move(flow)); }
  void Release(int64_t id, bool was_running, int64_t generated_tokens) override;
  void Transfer(int64_t id, const std::string& model) override { flows.Transfer(id, model); }

  void Accept();
  void BeginDrain();
  void CheckDrained();
  router::PoolModel* FindModel(const std::string& name) const { return pool_.Find(name); }
  bool IsRoute(const std::string& name) const { return router_ && router_->IsRoute(name); }
  // A fresh x-request-id.
  std::string NewRequestId();
  std::string RenderMetrics() const;

  ServerConfig config_;
  std::atomic<int64_t> open_connections{0};  // before ioc: sessions die with its handlers
  std::atomic<int64_t> preparing{0};  // work handed to `preparer` whose answer has not come back (drain waits)
  // The same by tenant (I/O thread only): with API keys a tenant may hold all but a reserve of
  // the prepare threads and queue, so another tenant's costly request always finds a place.
  std::unordered_map<std::string, int64_t> preparing_by_tenant;
  int64_t TenantPrepareShare() const;
  void ForgetPreparing(const std::string& tenant);
  asio::io_context ioc{1};
  tcp::acceptor acceptor;
  asio::signal_set signals;
  asio::steady_timer drain_timer;
  bool ready = false;
  bool draining = false;
  bool drain_deadline_passed = false;
  bool stopped = false;
  router::ModelPool pool_;  // destroyed before ioc (declared after it)
  std::unique_ptr<router::Router> router_;  // null: no routes; borrows the pool
  std::unique_ptr<RouterDegrader> degrader;  // over `router_`, once it is set
  RateLimiter limiter_;
  TenantLimiter tenant_limiter_;
  std::mt19937_64 request_ids{std::random_device{}()};
  ServerMetrics metrics_;   // its gauges read the pool's admission: destroyed first
  CorsPolicy cors;
  FlowRegistry flows;  // admitted or queued generations
  std::shared_ptr<cache::CacheService> caches_;  // reset by ~Server before the io_context goes
  // Requests' CPU-bound preparation (templates, tokenizer, grammar compiles) runs here, off the
  // I/O thread. Stopped first by ~Server: waits for the running jobs while the engines they
  // read live, drops the queued ones. Destroyed before pool and router.
  std::unique_ptr<WorkQueue> preparer;
};

// What a cache endpoint answers (computed off the I/O thread for a shared store).
struct CacheReply {
  int status = 200;
  std::string body;  // JSON
};

// The methods a cache endpoint takes ("GET, HEAD, PUT, DELETE"; cache_endpoints.cc), "" when
// path (no query) names none: what its 405's Allow and its CORS preflight say.
std::string CacheApiMethods(std::string_view path);
// A 405 naming the method and the path, with `allow` as its Allow header.
ApiError MethodNotAllowed(http::verb method, std::string_view path, const std::string& allow);

// One HTTP/1.1 connection (keep-alive, one request at a time): transport, auth, CORS, the
// endpoints that answer without a generation, and the ResponseSink of its current generation's
// flow (generation_flow.h), which holds all of that generation's state.
class Session : public std::enable_shared_from_this<Session>, public ResponseSink {
 public:
  Session(tcp::socket socket, Server::Impl* srv);
  ~Session() override;
  void Start() { DoRead(); }

  // ResponseSink (session_sink.cc).
  void StartStream(const ResponseHead& head) override;
  void Chunk(const std::string& data) override;
  void EndStream(const std::string& tail, int status) override;
  void Respond(const std::string& body, const ResponseHead& head) override;
  void Fail(const ApiError& e) override { RespondError(e); }
  void Drop(int status) override;
  void WatchClient() override { WatchDisconnect(); }

 private:
  // kWaiting: an answer is being computed (a generation's flow, or work off the I/O thread).
  enum class State { kReading, kWaiting, kResponding, kLingering, kClosed };

  void DoRead();
  void ReadBody();
  void OnRead(beast::error_code ec);
  void Handle();
  void HandleGeneration(ApiKind kind, const std::string& tenant);
  void HandleFeedback(const std::string& tenant);
  void HandleReady();
  void HandleRender(ApiKind kind, const std::string& tenant);
  // Runs `work` on the server's prepare workers and what it returns back here, unless the
  // session closed meanwhile (session_sink.cc); inline when `cheap`. work must be thread-safe
  // and touch nothing of the session. What work throws answers 500 (InternalError).
  using Then = std::function<void(Session*)>;
  void OffIoThread(std::function<Then()> work, bool cheap);
  // Whether the current request is cheap to prepare: a small body and no grammar to compile.
  bool CheapToPrepare(bool constrained) const;
  CacheHeaders RequestCacheHeaders() const;
  // GET/PUT/DELETE /v1/cache/..., /v1/sessions/... (cache_endpoints.cc).
  void HandleCacheApi(const std::string& tenant, http::verb method, const std::string& target);
  // Runs op against the caches (off the I/O thread when they block) and answers with its reply.
  void RunCacheOp(std::function<CacheReply()> op);
  void HandleTokenize(bool detokenize);
  void HandleModels(const std::string& one);
  void HandleSlo();  // slo_route.cc
  void HandleDashboard(const std::string& target);
  void Respond(int status, const std::string& content_type, const std::string& body,
               const std::vector<std::pair<std::string, std::string>>& extra = {});
  void RespondError(const ApiError& e);
  void Write(std::string bytes);
  void DoWrite();
  void ResponseDone();
  void Close();
  // After an error response whose request was not read to its end: stop sending, read and
  // discard what the client still sends for at most kLingerSeconds, then close.
  void Linger();
  void DiscardInput();
  // CORS (--cors-origin): the Access-Control-Allow-Origin this request's Origin earns ("" for
  // none), the headers every response then carries, and the answer to a preflight OPTIONS.
  void SetCors(const http::request<http::string_body>& req);
  std::string CorsHeaders() const;
  void RespondPreflight(const http::request<http::string_body>& req, const std::string& allow);
  void WatchDisconnect();
  void OnClientGone();
  // Something threw while handling the current request on the I/O thread (`where`): logs it,
  // and answers 500 unless an answer is under way (the flow's, if it has the request).
  void InternalError(const char* where, const std::exception& e);
  // This request's x-request-id (Handle sets it; "" before).
  void SetRequestId(const http::request<http::string_body>& req);

  tcp::socket socket_;
  Server::Impl* srv_;
  beast::flat_buffer buf_;
  std::optional<RequestParser> parser_;
  asio::steady_timer read_timer_;
  // When the current request was read: --request-timeout counts from here (FlowServices::Now).
  double arrived_s_ = 0;
  std::deque<std::string> outq_;
  bool writing_ = false;
  bool response_complete_ = false;  // the whole current response is queued
  bool keep_alive_ = true;
  bool linger_ = false;      // close by Linger (the request's bytes were not all read)
  bool client_gone_ = false;
  std::string cors_origin_;  // this request's Access-Control-Allow-Origin ("": none)
  State state_ = State::kReading;
  std::string route_;
  std::string request_id_;  // x-request-id of the current request
  std::string tenant_;      // the current request's ("default" without API keys)
  std::shared_ptr<GenerationFlow> flow_;  // the current generation (null: none)
  bool watching_ = false;
  bool read_after_watch_ = false;
  std::array<char, 1024> watch_buf_;
};

}  // namespace tarmac::server
