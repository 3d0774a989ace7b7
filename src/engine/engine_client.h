// EngineClient: the facade the server (and bench offline) use. Owns an EngineCore and the
// thread that runs its step loop; requests are submitted and cancelled from any thread.
//
// Submit validates synchronously (a bad request errors before anything is queued) and returns
// the request's stream of token events. Cancel takes effect at the start of the next step and
// frees every block the request held. Several EngineClients (one per model) can live in one
// process; each has its own thread pool and KV memory.
//
// Create warms the model up on the step thread first (EngineConfig::warmup).
//
// Thread-safe: every public method. The model and tokenizer are borrowed and must outlive it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine_core.h"
#include "engine/request_stream.h"

namespace tarmac::engine {

class EngineClient {
 public:
  static Result<std::unique_ptr<EngineClient>> Create(model::LlamaModel* model,
                                                      const tok::Tokenizer* tokenizer,
                                                      const EngineConfig& config);
  ~EngineClient();  // Shutdown()
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;

  // Errors (nothing queued): invalid parameters, a request that can never fit, or shut down.
  Result<std::shared_ptr<RequestStream>> Submit(EngineRequest r);
  void Cancel(int64_t id);
  // A snapshot taken after the latest step.
  EngineStats Stats() const;
  // Stops the loop; live requests end with FinishReason::kError. Idempotent.
  void Shutdown();

  // Resolved configuration (KV blocks and bytes filled in).
  const EngineConfig& config() const { return core_->config(); }
  int64_t kv_bytes() const { return core_->kv_bytes(); }
  // Test aid: when set, the step thread checks integrity after every step and aborts on error.
  void set_check_integrity(bool on) { check_integrity_ = on; }

 private:
  explicit EngineClient(std::unique_ptr<EngineCore> core);
  void Loop();

  std::unique_ptr<EngineCore> core_;
  struct Pending {
    int64_t id;
    EngineRequest req;
    std::shared_ptr<RequestStream> stream;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> inbox_;
  std::vector<int64_t> cancels_;
  bool stop_ = false;
  bool warmed_ = false;  // set once by the step thread after the warm-up
  std::atomic<int64_t> next_id_{1};
  std::atomic<bool> check_integrity_{false};
  mutable std::mutex stats_mu_;
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace tarmac::engine
