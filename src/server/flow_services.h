// What a GenerationFlow (generation_flow.h) talks to, as two narrow interfaces: FlowServices,
// the server around it (pool, router, caches, limiters, controller, metrics, the admitted
// generations, and an executor for work off the I/O thread and timers), and ResponseSink, where
// its answer goes (the HTTP session implements it; tests a fake that records what it got).
//
// Both are called on the server's I/O thread only, except FlowServices::Post (any thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_service.h"
#include "router/model_pool.h"
#include "router/router.h"
#include "router/target.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/limits.h"
#include "server/server_metrics.h"
#include "server/tenant_limits.h"

namespace tarmac::server {

class GenerationFlow;

// A request body under this size with no grammar to compile is prepared inline on the I/O
// thread (InlineWorkScope): encoding it takes well under a millisecond, less than the hop to a
// worker. The flow's and the session's own endpoints' one threshold.
inline constexpr size_t kCheapBodyBytes = 16 << 10;

// What a response's head says beyond its status: the route (x-tarmac-route) and the response
// cache's verdict (x-tarmac-cache: "hit", "miss"; "" when the response is not cached).
struct ResponseHead {
  std::optional<router::RouteInfo> route;
  std::string cache_status;
};

// Where one flow's answer goes. Exactly one of Respond, Fail, EndStream or Drop ends it; before
// EndStream come StartStream once, then Chunks.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  // A streamed (SSE) answer begins: its headers.
  virtual void StartStream(const ResponseHead& head) = 0;
  // One piece of the streamed body (SSE frames).
  virtual void Chunk(const std::string& data) = 0;
  // The stream's last frames; `status` is what the metrics count it as (an abort's, or 200).
  virtual void EndStream(const std::string& tail, int status) = 0;
  // The whole answer at once: 200, a JSON body.
  virtual void Respond(const std::string& body, const ResponseHead& head) = 0;
  // An error answer (nothing was streamed).
  virtual void Fail(const ApiError& e) = 0;
  // The client is gone: close without an answer; a `status` > 0 is counted as the response's.
  virtual void Drop(int status) = 0;
  // The flow waits (preparing, queued, running): tell it (ClientGone) if the client leaves.
  virtual void WatchClient() = 0;
};

class FlowServices {
 public:
  virtual ~FlowServices() = default;

  virtual const ServerConfig& config() const = 0;
  virtual router::ModelPool& pool() = 0;
  virtual router::Router* router() = 0;  // null: no routes
  virtual const std::shared_ptr<cache::CacheService>& caches() = 0;
  virtual RateLimiter& limiter() = 0;
  virtual TenantLimiter& tenant_limiter() = 0;
  virtual ServerMetrics& metrics() = 0;

  // The executor. Now: a steady clock in seconds (NowSeconds on the server).
  virtual double Now() const = 0;
  // Runs `work` off the I/O thread for `tenant`'s request, then what it returns back on the I/O
  // thread (also when the flow gave up meanwhile: the continuation checks). `work` must not
  // throw (CaptureThrow below). A refusal (the prepare queue is full, the tenant holds
  // its share of it) is returned at once, and nothing runs.
  using Continuation = std::function<void()>;
  virtual std::optional<ApiError> OffIoThread(const std::string& tenant, std::function<Continuation()> work) = 0;
  // Runs fn on the I/O thread soon; callable from any thread (an engine's notifier).
  virtual void Post(std::function<void()> fn) = 0;
  // Calls fire on the I/O thread at `at_s` (Now's clock) unless the returned cancel ran first.
  virtual std::function<void()> ArmTimer(double at_s, std::function<void()> fire) = 0;

  // The admitted generations. A fresh generation id.
  virtual int64_t NextGenerationId() = 0;
  // `id` waits in its model's admission queue or runs: the server starts it (Admitted) when the
  // queue lets it, and aborts it when it drains.
  virtual void Track(int64_t id, std::shared_ptr<GenerationFlow> flow) = 0;
  // `id` left the admission queue (was_running: or the engine): frees its slot and its tenant's
  // share (paying for its generated tokens) and starts what that made room for.
  virtual void Release(int64_t id, bool was_running, int64_t generated_tokens) = 0;
  // A cascade's escalated `id` now holds a slot of `model`: starts what the old slot made room for.
  virtual void Transfer(int64_t id, const std::string& model) = 0;
};

// Runs `work` (on a worker) and returns its continuation; what `work` throws is rethrown when
// the continuation runs, on the I/O thread, where the caller's handler answers it.
inline FlowServices::Continuation CaptureThrow(const std::function<FlowServices::Continuation()>& work) {
  try {
    return work();
  } catch (...) {
    return [e = std::current_exception()] { std::rethrow_exception(e); };
  }
}

}  // namespace tarmac::server
