// Server: the OpenAI-compatible HTTP server. Asynchronous (Boost.Beast over one Asio
// io_context run by one I/O thread: no thread per connection; thousands of idle or streaming
// clients cost a socket and a few buffers each). Routes:
//   POST /v1/completions, POST /v1/chat/completions (SSE when "stream": true)
//   GET  /v1/models, GET /v1/models/{id}, POST /tokenize, POST /detokenize
//   GET  /health (200 ready, 503 loading or draining), GET /metrics (Prometheus text)
//   GET  /v1/slo (the per-bucket SLO report, JSON: control/slo_report.h)
//   GET  /ready (readiness: 200 once every model is loaded and warm and its engine running;
//        503 while loading or draining)
//   POST /v1/completions/render, POST /v1/chat/completions/render ({"token_ids": the prompt
//        ids prefill would use, chat template included})
//   POST /v1/feedback ({"id": a routed response's id, "score": 0..1})
//   GET  /dashboard (the live page; its files under /dashboard/NAME, embedded at build time)
//   GET/PUT/DELETE /v1/cache/{retrieval|tool}/{key}, DELETE /v1/cache/{retrieval|tool|responses}
//   GET/PUT /v1/sessions/{id}/state, DELETE /v1/sessions/{id}
// Responses of deterministic requests are cached when their model or route opts in or the
// request asks (`cache`), under the request's scope (server_cache.h).
// A request whose `model` names a route (SetRoutes) is routed; one naming a model is not.
// Every route but /health and the dashboard's files needs "Authorization: Bearer KEY" when keys are configured.
// Every response carries x-request-id (the client's, when it sent a plain token of up to 128
// characters, else a fresh one); a 500 also names it in its message and in the log.
// A fault inside one request's processing (an exception on the I/O thread, an engine error of
// its own) answers that request 500 and leaves the server serving; an engine whose step loop
// died makes /ready 503 and its routes fall back (engine_client.h).
//
// Lifecycle: Create binds the listening socket; Run serves (answering 503 until SetReady) and
// returns after SIGTERM/SIGINT (or Stop): new requests get 503, in-flight ones may finish for
// up to drain_timeout_s (requests still preparing too), the rest are cancelled, then Run
// returns. The destructor waits for preparations still running (their engines must outlive
// them) and drops the queued ones.
//
// Threads: one I/O thread runs every connection; prepare threads (prepare_threads) render,
// encode and compile grammars for requests that are not cheap (session_prepare.cc), so a costly
// request stalls no other; the engines have their own.
//
// Thread-safety: AddModel, SetReady and Stop may be called from any thread; Run from one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cache/cache_service.h"
#include "metrics/registry.h"
#include "router/admission.h"
#include "router/pool_model.h"
#include "router/router.h"
#include "server/auth.h"
#include "server/limits.h"
#include "server/openai_request.h"
#include "server/tenant_limits.h"

namespace tarmac::control {
class Controller;
class SloTracker;
class RouteDegrader;
}  // namespace tarmac::control

namespace tarmac::server {

// What a tenant's requests get when they do not say (SLA tier, risk), and what its cache
// scope holds (permission scopes, policy version, sessions' KV budget).
struct TenantDefaults {
  std::string sla;                    // "" : none
  std::optional<metrics::Risk> risk;
  std::vector<std::string> scopes;
  std::string policy_version;         // "" : none (x-tarmac-policy-version may still set one)
  std::optional<int64_t> session_max_blocks;  // none: the cache config's
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                          // 0: any free port (see Server::port())
  std::optional<ApiKeyStore> keys;          // none: no auth, every request is tenant "default"
  int64_t max_body_bytes = 4 << 20;         // larger bodies get 413
  router::AdmissionLimits admission;        // totals over every model
  // Where the server's, the pool's and (given in their configs) the engines' series live; null:
  // the server makes one (engines added later should then use Server::registry()).
  std::shared_ptr<metrics::Registry> metrics;
  double rate_limit_rps = 0;                // per tenant; 0: off
  double rate_limit_burst = 0;              // bucket size (0: max(1, rps))
  // Per-tenant concurrency and token rate (tenant_limits.h): every tenant's (flags), and the
  // config's tenants' own (replacing it). All zero: off.
  TenantLimit tenant_limit;
  std::map<std::string, TenantLimit> tenant_limits;
  // Test aid: a generation request may carry "x-tarmac-debug-fault: NAME" (engine::InjectedFault)
  // to make its own processing fail there. Off: such a request is refused (400).
  bool debug_fault_injection = false;
  double request_timeout_s = 600;           // from arrival: preparation, admission wait, generation
  double drain_timeout_s = 30;
  double idle_timeout_s = 60;               // reading one request / idle keep-alive
  // Threads that prepare requests off the I/O thread (chat template, tokenizer, grammar
  // compile), and requests that may wait for one (503 beyond: a flood of costly grammars must
  // not queue without limit).
  int prepare_threads = 2;
  int prepare_queue = 64;
  // The prepare threads' nice value: a grammar compile or a long prompt's encoding must not take
  // CPU time from the engine threads generating for everyone (bench/NOTES.md).
  int prepare_nice = 10;
  // The SLO report's per-request bookkeeping (fed by the engines; null: no attainment), and
  // the degradation controller (null: off; then admission is exactly as without it). Both
  // outlive the server's I/O; the controller is stopped before the engines go.
  std::shared_ptr<control::SloTracker> slo_tracker;
  std::shared_ptr<control::Controller> controller;
  std::map<std::string, TenantDefaults> tenants;  // by tenant name
  // CORS: origins allowed to call from a browser ("*": any); empty: no CORS headers and no
  // preflight answers (OPTIONS is then a 405).
  std::vector<std::string> cors_origins;
  // Completions prompts (and /tokenize) recognise special-token text ("<|eot_id|>") unless a
  // request's parse_special says otherwise.
  bool parse_special = true;
  ParseDefaults parse_defaults;  // JSON whitespace of constrained outputs
  // When set, the model whose load llm-d's endpoint picker reads under vLLM's metric names
  // (server_metrics.h: WatchModelForPicker), registered when that model is added.
  std::string vllm_metrics_model;
  cache::CacheConfig cache;                 // the scoped caches (Validate()d by Create)
  // Models and routes whose responses are cached by default: their TTL (none: the cache's).
  std::map<std::string, std::optional<double>> cached_responses;
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> Create(ServerConfig config);
  ~Server();

  int port() const;
  std::shared_ptr<metrics::Registry> registry() const;
  // limits: the model's share of admission (default: the totals).
  void AddModel(std::unique_ptr<router::PoolModel> model, std::optional<router::AdmissionLimits> limits = std::nullopt);
  // The routes (virtual model names) over the models added so far. Waits for the I/O thread;
  // errors (Router::Validate) leave the server without routes.
  Status SetRoutes(router::RouterConfig routes);
  // The routes as the controller's "route to a smaller model" (Controller::SetRouteDegrader):
  // null before SetRoutes succeeds. The lowest SLA tiers are config.slo_tracker's (none
  // without one). Lives as long as the server; call after every AddModel.
  control::RouteDegrader* route_degrader();
  void SetReady();
  // Serves until drained. Returns 0.
  int Run();
  void Stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tarmac::server
