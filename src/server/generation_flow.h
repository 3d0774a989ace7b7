// GenerationFlow: one generation request (/v1/completions, /v1/chat/completions) from its
// parsed body to the end of its answer, as an explicit state machine. The HTTP session hands it
// the request and is its ResponseSink; everything the flow needs from the server comes through
// FlowServices (flow_services.h), so the whole pipeline runs in tests with a fake sink and an
// inline executor.
//
//   Start ─► kParsed ──plan (off the I/O thread)──► kKeyed ──cache lookup──► kLookedUp
//              │                                                                 │
//              │                     a route: its policy decides (I/O thread)    │
//              │                                 ▼                               │
//              │                             kDecided ──prepare (off the I/O)──► kPrepared
//              │                                                                 │
//              │           a cache hit runs at once; else admission: queued or run
//              │                                 ▼                               ▼
//              │                             kQueued ──────── admitted ──────► kRunning
//              │                                                                 │
//              └──── any refusal, error, timeout, abort, client gone ──► kFailed   kDone
//
// The plan (request_plan.h) is computed once: the prompts as the key model encodes them (the
// named model, or a route's baseline), the request's features and bucket, and the response
// cache's key; a route's policy decides on it, a plain model's request runs on it, and no model
// encodes the request twice. An admission refusal on a route falls back to the next model
// (prepared off the I/O thread again) until none is left (503 naming the models tried).
//
// Owns everything per request: the parsed request, its scope, cache plan and status, the job
// (its target and renderer), the admitted model and generation id, the abort reason and the
// timeout. Not thread-safe: every method runs on the server's I/O thread; work handed off the
// thread holds the flow (shared_ptr) and only what it was given.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "server/flow_services.h"
#include "server/generation_job.h"
#include "server/openai_request.h"
#include "server/request_plan.h"
#include "server/server_cache.h"

namespace tarmac::server {

// What the session read: the body and the headers the flow looks at.
struct FlowInput {
  ApiKind kind = ApiKind::kCompletion;
  std::string body;                        // the JSON body (the flow frees it once parsed)
  std::string tenant = "default";          // from the API key
  CacheHeaders cache_headers;
  std::optional<std::string> debug_fault;  // x-tarmac-debug-fault, if sent
  double arrived_s = 0;                    // FlowServices::Now() when read: the timeout counts from here
};

enum class FlowState { kParsed, kKeyed, kLookedUp, kDecided, kPrepared, kQueued, kRunning, kDone, kFailed };
const char* FlowStateName(FlowState s);

class GenerationFlow : public std::enable_shared_from_this<GenerationFlow> {
 public:
  // Preconditions: services and sink outlive nothing the flow needs after it ends (the flow
  // lets go of the sink once it ended).
  GenerationFlow(FlowServices* services, std::shared_ptr<ResponseSink> sink);

  // Parses and checks the request (rate limits, body, model, controller), then goes on by
  // itself. Ends at once (Fail) on a refusal.
  void Start(FlowInput in);
  // The admission queue lets a queued (or just admitted) generation run.
  void Admitted();
  // The engine has events for the running generation.
  void OnEngineEvents();
  // Ends the generation with `why` (the drain's deadline, the request timeout): a queued (or
  // preparing) one answers at once; a running one is cancelled and answers once the engine
  // confirms.
  void Abort(const ApiError& why);
  // The client left: whatever the flow waits for is dropped or cancelled.
  void ClientGone();
  // Something threw on the I/O thread while the flow had the request: logs it and answers 500
  // unless an answer is under way.
  void InternalError(const char* where, const std::exception& e);

  FlowState state() const { return state_; }
  bool ended() const { return state_ == FlowState::kDone || state_ == FlowState::kFailed; }
  // The model whose admission slot the generation holds ("" before admission).
  const std::string& admitted_model() const { return admitted_model_; }

 private:
  // The steps, in order.
  std::optional<ApiError> Parse(FlowInput in);
  void MakePlan();
  void OnPlanned(Result<RequestPlan> plan);
  void LookUp();
  void OnLookedUp(CacheAnswer a);
  void MakeJob(std::optional<cache::RecordedResponse> hit);
  void Decide();
  // Prepares the job off the I/O thread (inline when cheap), then `then` back on it.
  // after_fallback: a failure is the route's (counted as queue_full, the route told).
  void PrepareThen(void (GenerationFlow::*then)(), bool after_fallback);
  void OnPrepared();
  void Admit();
  void Arrive();  // into the admitted model's queue, falling back along a route while refused
  void Run();
  void Finish();

  // Work off the I/O thread (inline when cheap_), its continuation guarded: dropped once the
  // flow ended, what it throws answered as a 500.
  void OffIoThread(std::function<std::function<void()>()> work);
  // Ends with an error answer. `rejected`: counted as a refusal under that reason first.
  void Fail(const ApiError& e, const char* rejected = nullptr);
  // Routed: moves to the route's next model because of `reason` (none left: the error).
  std::optional<ApiError> Fallback(const std::string& reason);
  bool ArmTimeout();
  void StartStream();
  ResponseHead Head() const;
  int64_t GeneratedTokens() const;
  void CountSessionUse();

  FlowServices* const services_;
  std::shared_ptr<ResponseSink> sink_;  // null once ended
  FlowState state_ = FlowState::kParsed;
  double arrived_s_ = 0;
  std::string tenant_;
  bool cheap_ = false;            // small body, no grammar: prepared inline (InlineWorkScope)
  CacheHeaders cache_headers_;
  std::unique_ptr<GenRequest> req_;  // parsed; the job's once it is made
  bool in_session_ = false;       // the request names a session_id
  bool routed_ = false;
  cache::RequestScope scope_;
  ResponseCachePlan cache_plan_;
  std::optional<RequestPlan> plan_;
  enum class CacheStatus { kNotCached, kMiss, kHit };
  CacheStatus cache_status_ = CacheStatus::kNotCached;
  std::unique_ptr<GenerationJob> job_;
  int64_t gen_id_ = 0;            // 0: not tracked by the server
  std::string admitted_model_;    // whose admission slot the job holds
  bool stream_started_ = false;
  bool client_gone_ = false;
  std::optional<ApiError> aborted_;
  std::function<void()> cancel_timeout_;
  std::shared_ptr<std::atomic<bool>> wake_;  // an engine wake-up is posted and not yet run
};

}  // namespace tarmac::server
