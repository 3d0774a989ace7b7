// Internals of Server shared by http_server.cc (listener, routing state, drain) and
// http_session.cc (one connection). Everything here runs on the server's single I/O thread
// unless stated otherwise.
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
#include "server/generation_job.h"
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

struct Server::Impl {
  explicit Impl(ServerConfig c)
      : config(std::move(c)), acceptor(ioc), signals(ioc, SIGTERM, SIGINT), drain_timer(ioc),
        pool(config.admission, config.metrics),
        limiter(config.rate_limit_rps, config.rate_limit_burst > 0 ? config.rate_limit_burst : std::max(1.0, config.rate_limit_rps)),
        tenant_limiter(config.tenant_limit, config.tenant_limits),
        metrics(config.metrics), cors(config.cors_origins),
        preparer(std::make_unique<WorkQueue>(config.prepare_threads, static_cast<size_t>(config.prepare_queue),
                                             WorkQueue::OnStop::kDropQueued, config.prepare_nice)) {
    metrics.Watch(&pool.admission(), &open_connections, &preparing);
  }

  void Accept();
  void BeginDrain();
  void CheckDrained();
  router::PoolModel* FindModel(const std::string& name) const { return pool.Find(name); }
  bool IsRoute(const std::string& name) const { return router && router->IsRoute(name); }
  // A generation request (id) left the admission queue or the engine: frees its slot and its
  // tenant's (paying for the tokens it generated), starts queued requests, forgets the session.
  void Release(int64_t id, bool was_running, int64_t generated_tokens = 0);
  // A fresh x-request-id.
  std::string NewRequestId();
  std::string RenderMetrics() const;

  ServerConfig config;
  std::atomic<int64_t> open_connections{0};  // before ioc: sessions die with its handlers
  std::atomic<int64_t> preparing{0};  // requests handed to `preparer` whose answer has not come back (drain waits)
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
  router::ModelPool pool;  // destroyed before ioc (declared after it)
  std::unique_ptr<router::Router> router;  // null: no routes; borrows the pool
  std::unique_ptr<RouterDegrader> degrader;  // over `router`, once it is set
  RateLimiter limiter;
  TenantLimiter tenant_limiter;
  std::mt19937_64 request_ids{std::random_device{}()};
  ServerMetrics metrics;   // its gauges read the pool's admission: destroyed first
  CorsPolicy cors;
  std::map<int64_t, std::shared_ptr<Session>> inflight;  // admitted or queued generations
  int64_t next_gen_id = 1;
  std::shared_ptr<cache::CacheService> caches;  // reset by ~Server before the io_context goes
  // Requests' CPU-bound preparation (templates, tokenizer, grammar compiles; session_prepare.cc)
  // runs here, off the I/O thread. Stopped first by ~Server: waits for the running jobs while
  // the engines they read live, drops the queued ones. Destroyed before pool and router.
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

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl* srv);
  ~Session();
  void Start() { DoRead(); }

  // Called by the server.
  void StartGeneration();   // admission granted
  void Abort(const ApiError& why);  // drain deadline / shutdown: cancel or refuse
  bool queued() const { return state_ == State::kQueued; }
  const std::string& model_name() const;

 private:
  // kPreparing: the request's preparation is on a prepare worker (OffIoThread).
  enum class State { kReading, kPreparing, kQueued, kGenerating, kResponding, kLingering, kClosed };

  void DoRead();
  void ReadBody();
  void OnRead(beast::error_code ec);
  void Handle();
  void HandleGeneration(ApiKind kind, const std::string& tenant);
  // The request's x-tarmac-debug-fault (a test aid): none, or refused without
  // --debug-fault-injection, or an unknown fault.
  std::optional<ApiError> ParseDebugFault(engine::InjectedFault* fault) const;
  void HandleFeedback(const std::string& tenant);
  void HandleReady();
  void HandleRender(ApiKind kind, const std::string& tenant);
  // The scoped caches (session_cache.cc). A parsed generation request goes through the cache
  // phase (session ownership, response lookup; off the I/O thread for a shared store), then
  // runs: replayed from a hit, or on its model or route (recorded for the cache when planned).
  struct CacheAnswer;
  void BeginGeneration(GenRequest req, const std::string& tenant);
  // The response-cache key and bucket from the prompts as the key's model encodes them (none
  // when it could not encode them).
  void SetCacheKey(const router::PoolModel& m, const Result<std::vector<std::vector<int32_t>>>& prompts);
  // Session ownership and the response lookup for pending_, then RunGeneration.
  void LookUpCache(const std::string& tenant);
  void OnCacheAnswer(CacheAnswer a);
  void RunGeneration(std::optional<cache::RecordedResponse> hit);
  void CountSessionUse(const GenerationJob& job);
  // The generation's preparation (session_prepare.cc): the job goes to a prepare worker (for a
  // route first its Probe, then Decide back here), is prepared there, and comes back to
  // OnPrepared, which admits it. A job whose session closed meanwhile is dropped.
  using JobHolder = std::shared_ptr<std::unique_ptr<GenerationJob>>;
  void PrepareGeneration();
  void OnProbed(JobHolder job, const Result<router::PreparedRequests>& probe);
  void OnPrepared(JobHolder job, const std::optional<ApiError>& error);
  // Runs work on the server's prepare workers; what it returns then runs back on the I/O thread
  // (state kResponding) unless the session closed meanwhile. work must be thread-safe and touch
  // nothing of the session (it gets copies, or what the session handed over). What work throws
  // answers 500 (InternalError). A full prepare queue answers 503 at once (work never runs).
  // A cheap request (CheapToPrepare) runs both right here instead: queued behind costly ones it
  // would wait seconds for what takes microseconds (and what work throws propagates).
  using Then = std::function<void(Session*)>;
  void OffIoThread(std::function<Then()> work, bool cheap);
  // Whether the current request is cheap to prepare: a body under kCheapBodyBytes and no grammar
  // to compile (a cached grammar would be cheap too, but only a lookup could tell).
  bool CheapToPrepare(bool constrained) const;
  CacheHeaders RequestCacheHeaders() const;
  // GET/PUT/DELETE /v1/cache/..., /v1/sessions/... (cache_endpoints.cc).
  void HandleCacheApi(const std::string& tenant, http::verb method, const std::string& target);
  // Runs op against the caches (off the I/O thread when they block) and answers with its reply.
  void RunCacheOp(std::function<CacheReply()> op);
  // Admits the current job into its model's admission, falling back along its route while
  // refused (a routed request); responds when every candidate refused.
  void Admit();
  // The streamed response's headers (once), with the route when there is one.
  void WriteStreamHeaders();
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
  void OnEngineEvents();
  void FinishGeneration();
  // Arms gen_timer_ for the request's deadline (arrived_ + --request-timeout); false, having
  // answered 408, when the deadline passed while the request was prepared.
  bool ArmTimeout();
  // Something threw while handling the current request on the I/O thread (`where`): logs it,
  // drops a generation that has not started, and answers 500 unless an answer is under way.
  void InternalError(const char* where, const std::exception& e);
  // This request's x-request-id (Handle sets it; "" before).
  void SetRequestId(const http::request<http::string_body>& req);
  // Generated tokens of the current job's choices (what its tenant pays on release).
  int64_t GeneratedTokens() const;

  tcp::socket socket_;
  Server::Impl* srv_;
  beast::flat_buffer buf_;
  std::optional<RequestParser> parser_;
  asio::steady_timer read_timer_, gen_timer_;
  // When the current request was read: --request-timeout counts from here (its preparation,
  // cache lookup, admission wait and run).
  asio::steady_timer::time_point arrived_{};
  std::deque<std::string> outq_;
  bool writing_ = false;
  bool response_complete_ = false;  // the whole current response is queued
  bool keep_alive_ = true;
  bool linger_ = false;      // close by Linger (the request's bytes were not all read)
  std::string cors_origin_;  // this request's Access-Control-Allow-Origin ("": none)
  State state_ = State::kReading;
  std::string route_;
  std::string request_id_;  // x-request-id of the current request
  std::string tenant_;      // the current request's ("default" without API keys)
  int status_ = 0;
  // Current generation.
  std::unique_ptr<GenerationJob> gen_;
  int64_t gen_id_ = 0;
  std::string admitted_model_;  // whose admission slot the job holds
  bool headers_sent_ = false;
  bool client_gone_ = false;
  bool timed_out_ = false;
  std::optional<ApiError> aborted_;
  bool watching_ = false;
  bool read_after_watch_ = false;
  std::array<char, 1024> watch_buf_;
  std::shared_ptr<std::atomic<bool>> wake_ = std::make_shared<std::atomic<bool>>(false);
  // The current generation's cache phase.
  std::unique_ptr<GenRequest> pending_;   // parsed, waiting for the cache's answer
  cache::RequestScope scope_;
  ResponseCachePlan cache_plan_;
  std::string cache_key_;                 // "" : the response is not cached
  metrics::BucketId cache_bucket_ = metrics::kNoBucket;
  std::string session_id_;                // "" : no session
  std::string cache_status_;              // x-tarmac-cache: "hit", "miss" ("" : not cached)
};

}  // namespace tarmac::server
