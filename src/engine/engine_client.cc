#include "engine/engine_client.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "base/check.h"
#include "base/clock.h"
#include "base/cpu_affinity.h"
#include "engine/engine_core.h"

namespace tarmac::engine {

Result<std::unique_ptr<EngineClient>> EngineClient::Create(model::LlamaModel* model,
                                                           const tok::Tokenizer* tokenizer,
                                                           const EngineConfig& config) {
  TARMAC_ASSIGN_OR_RETURN(std::unique_ptr<EngineCore> core,
                          EngineCore::Create(model, tokenizer, config));
  return std::unique_ptr<EngineClient>(new EngineClient(std::move(core)));
}

EngineClient::EngineClient(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {
  knobs_ = core_->knobs();
  max_waiting_ = knobs_.max_waiting;
  // The warm-up runs on the step thread (its per-thread kernel scratch is what gets warm);
  // the constructor waits for it, so a caller that reports "ready" after Create is warm.
  // (Members, not a promise on this frame: the thread may still be inside set_value when the
  // waiter returns and destroys it.)
  thread_ = std::thread([this] {
    // Pinning was checked when the config was resolved; a failure here only loses isolation.
    if (const EngineConfig& c = core_->config(); !c.cpus.empty())
      (void)PinCurrentThread(ThreadCpus(c.cpus, c.threads, 0));
    if (core_->config().warmup) core_->Warmup();
    {
      std::lock_guard<std::mutex> lock(mu_);
      warmed_ = true;
    }
    cv_.notify_all();
    Loop();
  });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return warmed_; });
}

EngineClient::~EngineClient() { Shutdown(); }

Result<ValidRequest> EngineClient::Validate(EngineRequest r) const { return core_->Validate(std::move(r)); }
EngineStats EngineClient::Stats() const { return core_->Stats(); }
const EngineMetrics& EngineClient::metrics() const { return core_->metrics(); }
const metrics::CostCurve& EngineClient::decode_costs() const { return core_->decode_costs(); }
const metrics::CostCurve& EngineClient::prefill_costs() const { return core_->prefill_costs(); }

bool EngineClient::accepting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !stop_;
}

std::string EngineClient::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}
std::vector<prefix::BlockEvent> EngineClient::DrainEvents(size_t max) { return core_->DrainEvents(max); }
const EngineConfig& EngineClient::config() const { return core_->config(); }
GrammarCache* EngineClient::grammars() const { return core_->grammars(); }
int64_t EngineClient::kv_bytes() const { return core_->kv_bytes(); }

void EngineClient::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int32_t EngineClient::QueuedLocked() const {
  return core_->Stats().num_waiting + static_cast<int32_t>(inbox_.size()) + in_transit_;
}

int32_t EngineClient::num_waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return QueuedLocked();
}

Result<std::shared_ptr<RequestStream>> EngineClient::Submit(EngineRequest r) {
  TARMAC_ASSIGN_OR_RETURN(ValidRequest v, core_->Validate(std::move(r)));
  return Submit(std::move(v));
}

Result<std::shared_ptr<RequestStream>> EngineClient::Submit(ValidRequest r) {
  const int64_t id = next_id_++;
  auto stream = std::make_shared<RequestStream>(id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty())
      return ResourceExhausted("model '{}' is unhealthy: its engine failed ({})", core_->config().model_name, failure_);
    if (stop_) return ResourceExhausted("the engine is shutting down");
    const int32_t limit = max_waiting_.load(std::memory_order_relaxed);
    if (limit > 0 && QueuedLocked() >= limit)
      return ResourceExhausted("the engine's queue is full ({} requests waiting)", limit);
    inbox_.push_back({id, std::move(r), stream, NowSeconds()});
  }
  cv_.notify_all();
  return stream;
}

void EngineClient::Cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(id);
  }
  cv_.notify_all();
}

Status EngineClient::SetKnobs(const EngineKnobs& k) {
  TARMAC_RETURN_IF_ERROR(core_->CheckKnobs(k));
  {
    std::lock_guard<std::mutex> lock(mu_);
    new_knobs_ = k;
    max_waiting_ = k.max_waiting;  // Submit's bound applies at once
  }
  cv_.notify_all();
  return Status::Ok();
}

EngineKnobs EngineClient::knobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return knobs_;
}

void EngineClient::Loop() {
  std::vector<Pending> adds;
  std::vector<int64_t> cancels;
  std::optional<EngineKnobs> knobs;
  bool stalled = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] {
        return stop_ || !inbox_.empty() || !cancels_.empty() || new_knobs_ || (!core_->idle() && !stalled);
      };
      if (stalled) {
        cv_.wait_for(lock, std::chrono::milliseconds(1), ready);  // nothing fit; retry soon
      } else {
        cv_.wait(lock, ready);
      }
      if (stop_) break;
      adds.swap(inbox_);
      in_transit_ = static_cast<int32_t>(adds.size());
      cancels.swap(cancels_);
      knobs.swap(new_knobs_);
    }
    try {
      // A step boundary: knobs first, so the requests that arrived with them see them too.
      if (knobs) {
        core_->SetKnobs(*knobs);
        std::lock_guard<std::mutex> lock(mu_);
        knobs_ = *knobs;
        knobs.reset();
      }
      if (!adds.empty()) {  // most steps take nothing from the inbox: no second lock for them
        for (Pending& p : adds) AddOne(p);
        std::lock_guard<std::mutex> lock(mu_);
        in_transit_ = 0;  // in the core's count now
      }
      for (int64_t id : cancels) core_->Cancel(id);
      adds.clear();
      cancels.clear();
      stalled = !core_->Step() && !core_->idle();
    } catch (const std::exception& e) {
      // Requests taken from the inbox but not added yet: failed with the rest below.
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (Pending& p : adds)
          if (p.stream) inbox_.push_back(std::move(p));
        in_transit_ = 0;
      }
      adds.clear();
      Die(e.what());
      break;
    }
    if (check_integrity_) {
      if (Status st = core_->CheckIntegrity(); !st.ok()) {
        std::fprintf(stderr, "engine integrity check failed: %s\n", st.message().c_str());
        std::abort();
      }
    }
  }
  FailLeftovers();
}

void EngineClient::AddOne(Pending& p) {
  // One request's set-up: what it throws fails that request (its stream ends with the error).
  std::shared_ptr<RequestStream> stream = std::move(p.stream);
  try {
    CheckFailuresThrow checks_throw;
    core_->Add(p.id, std::move(p.req), stream, p.submitted_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tarmac engine '%s': request %lld failed: %s\n", core_->config().model_name.c_str(),
                 static_cast<long long>(p.id), e.what());
    TokenEvent ev;
    ev.finish = FinishReason::kError;
    ev.error = Internal("internal error while processing the request: {}", e.what());
    stream->Push(std::move(ev));
  }
}

void EngineClient::Die(const std::string& what) {
  std::fprintf(stderr, "tarmac engine '%s': the step loop failed: %s; the model is unhealthy from now on\n",
               core_->config().model_name.c_str(), what.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  failure_ = what.empty() ? "unknown error" : what;
  stop_ = true;
}

void EngineClient::FailLeftovers() {
  std::vector<Pending> left;
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(inbox_);
    failure = failure_;
  }
  if (failure.empty()) {
    // Requests still queued in the inbox never reached the core: fail them here.
    for (Pending& p : left) core_->Add(p.id, std::move(p.req), std::move(p.stream), p.submitted_s);
    core_->AbortAll(ResourceExhausted("the engine shut down before the request finished"));
    return;
  }
  const Status why = Internal("the engine failed: {}", failure);
  for (Pending& p : left) {
    TokenEvent ev;
    ev.finish = FinishReason::kError;
    ev.error = why;
    p.stream->Push(std::move(ev));
  }
  // The scheduler may be inconsistent: finish requests through it if it can, else just end
  // their streams.
  try {
    CheckFailuresThrow checks_throw;
    core_->AbortAll(why);
  } catch (const std::exception& e) {
    core_->AbandonAll(why);
  }
}

}  // namespace tarmac::engine
