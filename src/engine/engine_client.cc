#include "engine/engine_client.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace tarmac::engine {

Result<std::unique_ptr<EngineClient>> EngineClient::Create(model::LlamaModel* model,
                                                           const tok::Tokenizer* tokenizer,
                                                           const EngineConfig& config) {
  TARMAC_ASSIGN_OR_RETURN(std::unique_ptr<EngineCore> core,
                          EngineCore::Create(model, tokenizer, config));
  return std::unique_ptr<EngineClient>(new EngineClient(std::move(core)));
}

EngineClient::EngineClient(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {
  stats_ = core_->Stats();
  // The warm-up runs on the step thread (its per-thread kernel scratch is what gets warm);
  // the constructor waits for it, so a caller that reports "ready" after Create is warm.
  // (Members, not a promise on this frame: the thread may still be inside set_value when the
  // waiter returns and destroys it.)
  thread_ = std::thread([this] {
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

void EngineClient::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::shared_ptr<RequestStream>> EngineClient::Submit(EngineRequest r) {
  TARMAC_RETURN_IF_ERROR(core_->Validate(r));
  const int64_t id = next_id_++;
  auto stream = std::make_shared<RequestStream>(id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return ResourceExhausted("the engine is shutting down");
    inbox_.push_back({id, std::move(r), stream});
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

EngineStats EngineClient::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void EngineClient::Loop() {
  std::vector<Pending> adds;
  std::vector<int64_t> cancels;
  bool stalled = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] { return stop_ || !inbox_.empty() || !cancels_.empty() || (!core_->idle() && !stalled); };
      if (stalled) {
        cv_.wait_for(lock, std::chrono::milliseconds(1), ready);  // nothing fit; retry soon
      } else {
        cv_.wait(lock, ready);
      }
      if (stop_) break;
      adds.swap(inbox_);
      cancels.swap(cancels_);
    }
    for (Pending& p : adds) core_->Add(p.id, std::move(p.req), std::move(p.stream));
    for (int64_t id : cancels) core_->Cancel(id);
    adds.clear();
    cancels.clear();
    stalled = !core_->Step() && !core_->idle();
    if (check_integrity_) {
      if (Status st = core_->CheckIntegrity(); !st.ok()) {
        std::fprintf(stderr, "engine integrity check failed: %s\n", st.message().c_str());
        std::abort();
      }
    }
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_ = core_->Stats();
  }
  // Requests still queued in the inbox never reached the core: fail them here.
  std::vector<Pending> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(inbox_);
  }
  for (Pending& p : left) core_->Add(p.id, std::move(p.req), std::move(p.stream));
  core_->AbortAll(ResourceExhausted("the engine shut down before the request finished"));
}

}  // namespace tarmac::engine
