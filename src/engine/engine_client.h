// EngineClient: the facade the model pool (and bench offline) use. Owns an EngineCore and the
// thread that runs its step loop; requests are validated, submitted and cancelled from any
// thread.
//
// Validate checks a request synchronously (every check, once; errors carry the field) and
// returns the proof; Submit queues it and returns its stream of token events (Submit of a
// plain EngineRequest does both). Cancel takes effect at the start of the next step and frees
// every block the request held. SetKnobs changes the runtime knobs at the next step boundary;
// knobs() reads back the ones in effect. Several EngineClients (one per model) can live in one
// process; each has its own thread pool and KV memory, and its series in the registry its
// config names.
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
#include <optional>
#include <thread>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_metrics.h"
#include "engine/engine_types.h"
#include "engine/grammar_cache.h"
#include "engine/request_stream.h"
#include "prefix/radix_tree.h"

namespace tarmac::model {
class LlamaModel;
}
namespace tarmac::tok {
class Tokenizer;
}

namespace tarmac::engine {

class EngineCore;

class EngineClient {
 public:
  static Result<std::unique_ptr<EngineClient>> Create(model::LlamaModel* model,
                                                      const tok::Tokenizer* tokenizer,
                                                      const EngineConfig& config);
  ~EngineClient();  // Shutdown()
  EngineClient(const EngineClient&) = delete;
  EngineClient& operator=(const EngineClient&) = delete;

  Result<ValidRequest> Validate(EngineRequest r) const;
  // Errors (nothing queued): the engine's queue is full (max_waiting), or shut down.
  Result<std::shared_ptr<RequestStream>> Submit(ValidRequest r);
  // Validate, then Submit.
  Result<std::shared_ptr<RequestStream>> Submit(EngineRequest r);
  void Cancel(int64_t id);

  // Errors name the bad knob; nothing changes then. Takes effect at the next step boundary.
  Status SetKnobs(const EngineKnobs& k);
  // The knobs in effect (those of the latest SetKnobs once a step boundary has passed).
  EngineKnobs knobs() const;

  // Counters and occupancy now, read from atomics (no work on the step thread).
  EngineStats Stats() const;
  const EngineMetrics& metrics() const;
  // Measured step costs (EngineCore::decode_costs / prefill_costs). Thread-safe.
  const metrics::CostCurve& decode_costs() const;
  const metrics::CostCurve& prefill_costs() const;
  // False once Shutdown has begun or the step loop died (Submit then fails).
  bool accepting() const;
  // Why the step loop died ("" while it runs or after a plain Shutdown). The loop dies when a
  // step throws outside any one request's processing (EngineCore::Step): the engine is then
  // unhealthy for good: it takes no requests (Submit: ResourceExhausted naming the failure, so
  // a route falls back), every live and queued request ends with an Internal error, and the
  // server's readiness turns false.
  std::string failure() const;
  // Up to `max` of the oldest prefix-cache events not drained yet (config event_capacity > 0).
  std::vector<prefix::BlockEvent> DrainEvents(size_t max = SIZE_MAX);
  // Requests submitted and not yet running (the engine's queue and its inbox).
  int32_t num_waiting() const;
  // Stops the loop; live requests end with FinishReason::kError. Idempotent.
  void Shutdown();

  // Resolved configuration (KV blocks and bytes filled in).
  const EngineConfig& config() const;
  // The model's compiled grammars, for EngineRequest::grammar (null without a tokenizer).
  GrammarCache* grammars() const;
  int64_t kv_bytes() const;
  // Test aid: when set, the step thread checks integrity after every step and aborts on error.
  void set_check_integrity(bool on) { check_integrity_ = on; }

 private:
  explicit EngineClient(std::unique_ptr<EngineCore> core);
  void Loop();
  // The step loop's body threw `what`: the engine stops taking requests.
  void Die(const std::string& what);
  // Ends every request still queued or live (after the loop).
  void FailLeftovers();

  std::unique_ptr<EngineCore> core_;
  struct Pending {
    int64_t id;
    ValidRequest req;
    std::shared_ptr<RequestStream> stream;
    double submitted_s;  // NowSeconds() at Submit: the core's queue time and TTFT start here
  };
  // Adds one request to the core on the step thread; what its set-up throws fails it alone.
  void AddOne(Pending& p);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> inbox_;
  // Requests the step thread took from inbox_ and has not added to the core yet: counted as
  // waiting, so Submit's max_waiting bound holds while they are in neither place.
  int32_t in_transit_ = 0;
  // Waiting requests as Submit's bound counts them (the core's, the inbox, in transit). Holds mu_.
  int32_t QueuedLocked() const;
  std::vector<int64_t> cancels_;
  std::optional<EngineKnobs> new_knobs_;  // to apply at the next step boundary
  EngineKnobs knobs_;                     // in effect (read back)
  bool stop_ = false;
  std::string failure_;  // why the loop died ("": it did not)
  bool warmed_ = false;  // set once by the step thread after the warm-up
  std::atomic<int64_t> next_id_{1};
  std::atomic<int32_t> max_waiting_{0};   // knobs_.max_waiting, for Submit
  std::atomic<bool> check_integrity_{false};
  std::thread thread_;
};

}  // namespace tarmac::engine
