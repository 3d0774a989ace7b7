// GenerationFlow (generation_flow.h): its steps in order (parse, plan, cache lookup, decide,
// prepare, admit, run, finish), then the ways it ends early (abort, client gone, failure).
#include "server/generation_flow.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "base/check.h"
#include "base/thread_role.h"
#include "cache/cache_keys.h"
#include "cache/response_targets.h"
#include "server/slo_control.h"

namespace tarmac::server {
namespace {

using cache::CacheKind;

}  // namespace

const char* FlowStateName(FlowState s) {
  switch (s) {
    case FlowState::kParsed: return "parsed";
    case FlowState::kKeyed: return "keyed";
    case FlowState::kLookedUp: return "looked up";
    case FlowState::kDecided: return "decided";
    case FlowState::kPrepared: return "prepared";
    case FlowState::kQueued: return "queued";
    case FlowState::kRunning: return "running";
    case FlowState::kDone: return "done";
    case FlowState::kFailed: return "failed";
  }
  return "?";
}

GenerationFlow::GenerationFlow(FlowServices* services, std::shared_ptr<ResponseSink> sink)
    : services_(services), sink_(std::move(sink)) {
  TARMAC_CHECK(services_ != nullptr && sink_ != nullptr);
}

void GenerationFlow::Start(FlowInput in) {
  arrived_s_ = in.arrived_s;
  cache_headers_ = in.cache_headers;
  if (auto e = Parse(std::move(in))) return Fail(*e);
  MakePlan();
}

std::optional<ApiError> GenerationFlow::Parse(FlowInput in) {
  FlowServices& s = *services_;
  const ServerConfig& config = s.config();
  tenant_ = in.tenant;
  const std::string& tenant = tenant_;
  int retry = 1;
  if (!s.limiter().Allow(tenant, s.Now(), &retry)) {
    s.metrics().CountRejected("rate_limited");
    return TooManyRequests("rate limit reached for tenant '" + tenant + "'; retry later", retry, "rate_limit_exceeded");
  }
  // A tenant at its share is refused before its request is parsed or prepared (Admit checks again).
  if (auto refused = s.tenant_limiter().Precheck(tenant, s.Now())) {
    s.metrics().CountRejected("tenant_limited");
    return TooManyRequests(refused->message, refused->retry_after_s, refused->code);
  }
  auto req = std::make_unique<GenRequest>();
  if (auto e = ParseGenRequest(in.body, in.kind, req.get(), config.parse_defaults)) return e;
  if (in.debug_fault) {
    if (!config.debug_fault_injection)
      return BadRequest("x-tarmac-debug-fault", "the x-tarmac-debug-fault header is a test aid, refused unless the server "
                                                "runs with --debug-fault-injection");
    auto f = engine::ParseInjectedFault(*in.debug_fault);
    if (!f.ok()) return BadRequest("x-tarmac-debug-fault", "x-tarmac-debug-fault: " + f.status().message());
    req->spec.fault = *f;
  }
  if (!req->parse_special_given) req->spec.parse_special = config.parse_special;
  req->spec.tenant = tenant;
  if (auto t = config.tenants.find(tenant); t != config.tenants.end()) {
    if (req->spec.sla.empty()) req->spec.sla = t->second.sla;
    if (!req->spec.risk_given && t->second.risk) {
      req->spec.risk = *t->second.risk;
      req->spec.risk_given = true;
    }
  }
  router::Router* router = s.router();
  routed_ = router != nullptr && router->IsRoute(req->model);
  if (!routed_ && s.pool().Find(req->model) == nullptr)
    return NotFound("The model '" + req->model + "' does not exist", "model", "model_not_found");
  // The controller judges a routed request by its route's baseline (the model always there),
  // before the plan, so that a capped max_tokens is part of the response's cache key.
  const std::string controlled = routed_ ? router->baseline(req->model) : req->model;
  if (auto e = ApplyController(config.controller.get(), controlled, req.get(), &s.metrics())) return e;
  if (auto e = ScopeOf(config, tenant, req->model, req->locale, cache_headers_, &scope_)) return e;
  if (auto e = PlanResponseCache(config, *req, cache_headers_, &cache_plan_)) return e;
  req->spec.ns_key = cache::NamespaceKey(s.caches()->secret(), scope_);
  req->spec.session = SessionRetention(config, tenant, req->spec.ns_key, req->session_id);
  // The prompts are final now: each model encodes them once for every later step.
  req->spec.encoded = std::make_shared<router::EncodedPrompts>();
  in_session_ = !req->session_id.empty();
  cheap_ = in.body.size() < kCheapBodyBytes && !req->spec.constrained();
  req_ = std::move(req);
  return std::nullopt;
}

void GenerationFlow::MakePlan() {
  router::Router* router = services_->router();
  const std::string& key_model = routed_ ? router->baseline(req_->model) : req_->model;
  const router::PoolModel* m = services_->pool().Find(key_model);
  if (m == nullptr)
    return Fail(Unavailable(fmt::format("route {}: its baseline {} is not served", req_->model, key_model)));
  // The request is the worker's until the plan comes back; it reads copies of the rest.
  auto held = std::make_shared<std::unique_ptr<GenRequest>>(std::move(req_));
  metrics::BucketTable* buckets = &services_->config().metrics->buckets();
  OffIoThread([this, m, held, buckets, keyed = cache_plan_.active(), scope = scope_]() {
    auto plan = std::make_shared<Result<RequestPlan>>(
        PlanRequest(*m, (*held)->spec, *buckets, keyed, scope, (*held)->key_params));
    return std::function<void()>([this, held, plan] {
      req_ = std::move(*held);
      OnPlanned(std::move(*plan));
    });
  });
}

void GenerationFlow::OnPlanned(Result<RequestPlan> plan) {
  if (!plan.ok()) return Fail(FromStatus(plan.status()));
  plan_ = std::move(plan).value();
  if (!plan_->cache_key.empty()) cache_status_ = CacheStatus::kMiss;
  state_ = FlowState::kKeyed;
  LookUp();
}

void GenerationFlow::LookUp() {
  const bool lookup = !plan_->cache_key.empty() && cache_plan_.lookup;
  if (!lookup && req_->session_id.empty()) {
    state_ = FlowState::kLookedUp;
    return MakeJob(std::nullopt);
  }
  // On the caches' thread when the store blocks: ownership of the session, then the lookup.
  std::shared_ptr<cache::CacheService> caches = services_->caches();
  std::string response_key = lookup ? plan_->cache_key : std::string();
  std::string session_key = req_->session_id.empty() ? std::string() : cache::SessionKey(req_->session_id);
  std::shared_ptr<GenerationFlow> self = shared_from_this();
  auto job = [caches, response_key, session_key, tenant = req_->spec.tenant, self] {
    CacheAnswer a = LookUpCaches(*caches, response_key, session_key, tenant);
    self->services_->Post([self, a = std::move(a)]() mutable {
      if (self->ended()) return;
      try {
        self->OnLookedUp(std::move(a));
      } catch (const std::exception& e) {
        self->InternalError("preparing", e);
      }
    });
  };
  if (!caches->Submit(std::move(job))) {
    caches->CountError(CacheKind::kResponse);
    CacheAnswer busy;
    busy.error = true;
    OnLookedUp(std::move(busy));
  }
}

void GenerationFlow::OnLookedUp(CacheAnswer a) {
  if (a.not_owner) return Fail(NotFound("no session '" + req_->session_id + "'", "session_id"));
  FlowServices& s = *services_;
  const router::PoolModel* answered = a.hit ? s.pool().Find(a.hit->model) : nullptr;
  if (!plan_->cache_key.empty() && cache_plan_.lookup) s.caches()->CountLookup(CacheKind::kResponse, plan_->bucket, answered != nullptr);
  state_ = FlowState::kLookedUp;
  if (answered == nullptr) return MakeJob(std::nullopt);
  // What the hit saved, priced on the answering model's measured step costs.
  const int64_t prefill = a.hit->total_prompt_tokens(), decode = a.hit->total_output_tokens();
  const double seconds = answered->engine->prefill_costs().Seconds(static_cast<double>(prefill)) +
                         static_cast<double>(decode) * answered->engine->decode_costs().Seconds(1);
  s.caches()->CountSaved(CacheKind::kResponse, plan_->bucket, prefill, decode, seconds);
  cache_status_ = CacheStatus::kHit;
  MakeJob(std::move(a.hit));
}

void GenerationFlow::MakeJob(std::optional<cache::RecordedResponse> hit) {
  FlowServices& s = *services_;
  std::unique_ptr<router::Target> target;
  if (hit) {
    const router::PoolModel* m = s.pool().Find(hit->model);
    target = std::make_unique<cache::ReplayTarget>(m, std::move(*hit));
  } else {
    if (routed_) {
      target = s.router()->MakeTarget(req_->model, req_->spec.tenant);
    } else {
      target = std::make_unique<router::EngineTarget>(s.pool().Find(req_->model));  // a model by name: no routing
    }
    if (!plan_->cache_key.empty()) {
      std::weak_ptr<cache::CacheService> weak = s.caches();
      auto store = [weak, key = plan_->cache_key, ttl = cache_plan_.ttl_s](cache::RecordedResponse r) {
        auto caches = weak.lock();
        if (!caches) return;
        std::string bytes = cache::EncodeRecorded(r);
        if (static_cast<int64_t>(bytes.size()) > caches->config().response.max_entry_bytes) return;  // too big to keep
        caches->Submit([caches, key, bytes = std::move(bytes), ttl] {
          if (!caches->store(CacheKind::kResponse).Put(key, bytes, ttl).ok()) caches->CountError(CacheKind::kResponse);
        });
      };
      target = std::make_unique<cache::RecordingTarget>(std::move(target), std::move(store));
    }
  }
  // A model's own engine (no route, no replay, no recording around it) runs the request as
  // the plan prepared it on that model; the others see their Prepare.
  const bool as_planned = !hit && !routed_ && plan_->cache_key.empty();
  job_ = std::make_unique<GenerationJob>(std::move(*req_), std::move(target));
  req_.reset();
  if (job_->needs_decision()) return Decide();
  if (as_planned) {
    job_->Adopt(std::move(plan_->prepared));
    return OnPrepared();
  }
  PrepareThen(&GenerationFlow::OnPrepared, false);
}

void GenerationFlow::Decide() {
  // The route's policy reads and updates the router: here, on the I/O thread, on the plan.
  if (auto e = job_->Decide(plan_->prepared)) return Fail(*e);
  state_ = FlowState::kDecided;
  PrepareThen(&GenerationFlow::OnPrepared, false);
}

void GenerationFlow::PrepareThen(void (GenerationFlow::*then)(), bool after_fallback) {
  // The job is the worker's until it comes back: the flow keeps no pointer to it meanwhile.
  auto held = std::make_shared<std::unique_ptr<GenerationJob>>(std::move(job_));
  OffIoThread([this, held, then, after_fallback]() {
    auto error = std::make_shared<std::optional<ApiError>>((*held)->Prepare());
    return std::function<void()>([this, held, error, then, after_fallback] {
      job_ = std::move(*held);
      if (!*error) return (this->*then)();
      if (after_fallback) job_->Finished(true);
      Fail(**error, after_fallback ? "queue_full" : nullptr);
    });
  });
}

void GenerationFlow::OnPrepared() {
  state_ = FlowState::kPrepared;
  gen_id_ = services_->NextGenerationId();
  if (!ArmTimeout()) return;
  if (cache_status_ == CacheStatus::kHit) {  // no engine, so no admission slot
    admitted_model_ = job_->model_name();
    return Run();
  }
  Admit();
}

bool GenerationFlow::ArmTimeout() {
  const double limit = services_->config().request_timeout_s;
  ApiError timeout;
  timeout.status = 408;
  timeout.message = fmt::format("the request timed out after {} s (--request-timeout)", limit);
  timeout.type = timeout.code = "timeout";
  const double deadline = arrived_s_ + limit;
  if (services_->Now() >= deadline) {
    // Spent preparing (a prepare queue, a grammar compile): never admitted, nothing to release.
    if (job_->routed()) job_->Finished(true);
    Fail(timeout, "timeout");
    return false;
  }
  std::weak_ptr<GenerationFlow> weak = weak_from_this();
  cancel_timeout_ = services_->ArmTimer(deadline, [weak, timeout] {
    if (auto f = weak.lock()) f->Abort(timeout);
  });
  return true;
}

void GenerationFlow::Admit() {
  FlowServices& s = *services_;
  // The tenant's share first (concurrency, token rate): refused requests never queue.
  if (auto refused = s.tenant_limiter().Acquire(job_->tenant(), gen_id_, job_->prompt_tokens(), s.Now())) {
    if (job_->routed()) job_->Finished(true);
    return Fail(TooManyRequests(refused->message, refused->retry_after_s, refused->code), "tenant_limited");
  }
  Arrive();
}

void GenerationFlow::Arrive() {
  FlowServices& s = *services_;
  admitted_model_ = job_->model_name();
  switch (s.pool().admission().Arrive(admitted_model_, gen_id_, job_->admission_tokens(), job_->priority())) {
    case router::Admission::Decision::kQueued:
      s.Track(gen_id_, shared_from_this());
      state_ = FlowState::kQueued;
      sink_->WatchClient();
      return;
    case router::Admission::Decision::kRun:
      s.Track(gen_id_, shared_from_this());
      return Run();
    case router::Admission::Decision::kRejected:
      break;
  }
  if (!job_->routed()) {
    return Fail(TooManyRequests("the server's request queue is full; retry later", 1, "queue_full"), "queue_full");
  }
  // The route's next model takes it, if one is left: prepared for it, then into its queue.
  if (auto e = Fallback(admitted_model_ + "'s queue is full")) return Fail(*e, "queue_full");
  PrepareThen(&GenerationFlow::Arrive, true);
}

std::optional<ApiError> GenerationFlow::Fallback(const std::string& reason) {
  if (auto e = job_->Fallback(reason)) {
    job_->Finished(true);
    return e;
  }
  return std::nullopt;
}

void GenerationFlow::Admitted() {
  if (state_ != FlowState::kQueued) return;  // already running, or ended meanwhile
  Run();
}

void GenerationFlow::Run() {
  FlowServices& s = *services_;
  state_ = FlowState::kRunning;
  std::weak_ptr<GenerationFlow> weak = weak_from_this();
  // One wake-up posted at a time however many events the engine emits meanwhile.
  auto wake = std::make_shared<std::atomic<bool>>(false);
  wake_ = wake;
  auto notify = [weak, wake, services = services_] {
    if (!wake->exchange(true))
      services->Post([weak] {
        if (auto f = weak.lock()) f->OnEngineEvents();
      });
  };
  if (auto e = job_->Start(notify)) {
    // Keep the flow alive while it gives its slot back (Release may drop the last reference).
    std::shared_ptr<GenerationFlow> self = shared_from_this();
    s.Release(gen_id_, true, 0);
    if (e->status == 503 && job_->routed()) {
      // The model stopped taking requests: the route's baseline may, under a fresh id.
      if (auto f = Fallback(admitted_model_ + " is not accepting requests"); !f) {
        gen_id_ = s.NextGenerationId();
        state_ = FlowState::kPrepared;
        return PrepareThen(&GenerationFlow::Admit, true);
      } else {
        return Fail(*f);
      }
    }
    job_->Finished(true);
    return Fail(*e);
  }
  if (job_->streaming() && !job_->holds_back()) StartStream();
  sink_->WatchClient();
  OnEngineEvents();
}

void GenerationFlow::OnEngineEvents() {
  if (wake_) wake_->store(false);
  if (state_ != FlowState::kRunning) return;
  std::string sse;
  bool done = false;
  try {
    done = job_->Poll(&sse);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tarmac serve: internal error streaming a response: %s\n", e.what());
    job_->CancelAll();
  }
  // A cascade that escalated runs on another model now: its admission slot follows.
  if (job_->model_name() != admitted_model_) {
    admitted_model_ = job_->model_name();
    services_->Transfer(gen_id_, admitted_model_);
  }
  if (job_->streaming() && !client_gone_ && (job_->released() || done)) StartStream();
  if (job_->streaming() && !client_gone_ && !sse.empty()) sink_->Chunk(sse);
  if (done) Finish();
}

void GenerationFlow::StartStream() {
  if (stream_started_) return;
  stream_started_ = true;
  sink_->StartStream(Head());
  std::string prelude = job_->render().StreamPrelude();
  if (!prelude.empty()) sink_->Chunk(prelude);
}

ResponseHead GenerationFlow::Head() const {
  ResponseHead h;
  if (job_) h.route = job_->route_info();
  h.cache_status = cache_status_ == CacheStatus::kHit ? "hit" : cache_status_ == CacheStatus::kMiss ? "miss" : "";
  return h;
}

void GenerationFlow::Finish() {
  FlowServices& s = *services_;
  if (cancel_timeout_) cancel_timeout_();
  const int64_t generated = GeneratedTokens();
  const bool failed = aborted_.has_value() || job_->render().EngineError().has_value();
  job_->Finished(failed);
  if (!failed && in_session_) CountSessionUse();
  // Keep the flow alive while it gives its slot back (Release may drop the last reference).
  std::shared_ptr<GenerationFlow> self = shared_from_this();
  std::shared_ptr<ResponseSink> sink = std::move(sink_);
  const int64_t id = gen_id_;
  if (client_gone_) {
    sink->Drop(499);  // nginx's "client closed request"
  } else if (job_->streaming()) {
    std::string tail;
    if (aborted_) tail += "data: " + aborted_->ToJson() + "\n\n";
    tail += job_->render().StreamEpilogue();
    sink->EndStream(tail, aborted_ ? aborted_->status : 200);
  } else if (aborted_) {
    sink->Fail(*aborted_);
  } else if (auto e = job_->render().EngineError()) {
    sink->Fail(*e);
  } else {
    sink->Respond(job_->render().ResponseBody(), Head());
  }
  state_ = failed ? FlowState::kFailed : FlowState::kDone;
  job_.reset();
  s.Release(id, true, generated);
}

int64_t GenerationFlow::GeneratedTokens() const {
  int64_t n = 0;
  if (job_)
    for (const ChoiceState& c : job_->render().choices()) n += c.tokens;
  return n;
}

void GenerationFlow::CountSessionUse() {
  const auto& choices = job_->render().choices();
  if (choices.empty() || cache_status_ == CacheStatus::kHit) return;  // a replay computed nothing
  int32_t cached = 0;
  for (const ChoiceState& c : choices) cached = std::max(cached, c.metrics.cached_prompt_tokens);
  const metrics::BucketId bucket = choices[0].metrics.bucket;
  cache::CacheService& caches = *services_->caches();
  caches.CountLookup(CacheKind::kSession, bucket, cached > 0);
  if (cached > 0) {
    const router::PoolModel* m = services_->pool().Find(job_->model_name());
    const double seconds = m ? m->engine->prefill_costs().Seconds(cached) : 0.0;
    caches.CountSaved(CacheKind::kSession, bucket, cached, 0, seconds);
  }
}

void GenerationFlow::Abort(const ApiError& why) {
  if (aborted_ || ended()) return;
  aborted_ = why;
  if (state_ == FlowState::kRunning) return job_->CancelAll();  // events end within one engine step
  // Queued, or preparing again after a fallback: answered now (what is off the thread is dropped).
  std::shared_ptr<GenerationFlow> self = shared_from_this();
  const bool queued = state_ == FlowState::kQueued;
  const int64_t id = gen_id_;
  Fail(why, why.status == 408 ? "timeout" : "draining");
  if (queued) services_->Release(id, false, 0);
}

void GenerationFlow::ClientGone() {
  if (client_gone_ || ended()) return;
  client_gone_ = true;
  if (state_ == FlowState::kRunning) return job_->CancelAll();  // Finish drops the answer once the engine confirms
  services_->metrics().CountRejected("client_gone");
  std::shared_ptr<GenerationFlow> self = shared_from_this();
  if (cancel_timeout_) cancel_timeout_();
  job_.reset();
  std::shared_ptr<ResponseSink> sink = std::move(sink_);
  const bool queued = state_ == FlowState::kQueued;
  state_ = FlowState::kFailed;  // work still off the I/O thread is dropped when it returns
  sink->Drop(0);
  if (queued) services_->Release(gen_id_, false, 0);
}

void GenerationFlow::Fail(const ApiError& e, const char* rejected) {
  if (ended()) return;
  if (cancel_timeout_) cancel_timeout_();
  if (rejected != nullptr) services_->metrics().CountRejected(rejected);
  // Never admitted (or already released): only a tenant's share may be held.
  if (gen_id_ != 0) services_->tenant_limiter().Release(gen_id_, 0, services_->Now());
  std::shared_ptr<GenerationFlow> self = shared_from_this();
  std::shared_ptr<ResponseSink> sink = std::move(sink_);
  job_.reset();
  req_.reset();
  state_ = FlowState::kFailed;
  sink->Fail(e);
}

void GenerationFlow::InternalError(const char* where, const std::exception& e) {
  std::fprintf(stderr, "tarmac serve: internal error %s a generation: %s\n", where, e.what());
  if (ended()) return;
  if (state_ == FlowState::kQueued || state_ == FlowState::kRunning) {
    // Admitted: the engine (or the queue) still holds it; cancel and let it end as usual.
    const ApiError why = ServerError(std::string("internal error: ") + e.what());
    if (state_ == FlowState::kQueued) return Abort(why);
    aborted_ = why;
    return job_->CancelAll();
  }
  Fail(ServerError(std::string("internal error: ") + e.what()));
}

void GenerationFlow::OffIoThread(std::function<std::function<void()>()> work) {
  std::shared_ptr<GenerationFlow> self = shared_from_this();
  auto guarded = [self](const std::function<void()>& then) {
    if (self->ended()) return;  // the client left, or the flow gave up, meanwhile
    try {
      then();
    } catch (const std::exception& e) {
      self->InternalError("preparing", e);
    }
  };
  if (cheap_) {
    FlowServices::Continuation then;
    {
      InlineWorkScope inline_work;
      then = CaptureThrow(work);
    }
    return guarded(then);
  }
  sink_->WatchClient();  // a client gone meanwhile drops the work's answer
  auto refused = services_->OffIoThread(tenant_, [work = std::move(work), guarded]() -> FlowServices::Continuation {
    FlowServices::Continuation then = CaptureThrow(work);
    return [guarded, then = std::move(then)] { guarded(then); };
  });
  if (refused) Fail(*refused, "prepare_busy");
}

}  // namespace tarmac::server
