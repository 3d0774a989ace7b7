// GenerationFlow from admission to its end: run, stream, finish; and the ways it ends early
// (abort, client gone, failure, internal error). See generation_flow.h.
#include <algorithm>
#include <atomic>
#include <cstdio>

#include "server/generation_flow.h"

namespace tarmac::server {

using cache::CacheKind;

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

}  // namespace tarmac::server
