// Target: where a generation runs. Today one model's engine (EngineTarget); a route over
// several models (a cascade that lets a small model answer first) is another Target. The
// server's generation job prepares its spec through the target, starts it, and reads each
// choice's events through it, so a target can hold events back (a cascade decides on the
// first k tokens before anything reaches the client) or switch the model that answers.
//
// Not thread-safe: one job on the server's I/O thread owns a target; the `notify` given to
// Start runs on engine threads and must only post a wake-up. Preparation is the exception, so
// that the server can run its CPU-bound part (chat template, tokenizer, grammar compile) off
// the I/O thread: Probe is const and thread-safe; Prepare of a decided target (one that does
// not needs_decision()) touches only the target and the models' thread-safe engines, so it may
// run on another thread while the owner hands the target over (and does not touch it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request_stream.h"
#include "router/generation_spec.h"
#include "router/pool_model.h"

namespace tarmac::router {

// What a routed response says about its route (the `tarmac` object, x-tarmac-route).
struct RouteInfo {
  std::string route, policy, model, reason;
  bool escalated = false;  // a cascade handed the request to its large model
  std::string escalated_from;  // then: its small model
  bool fallback = false;   // the baseline served it instead of the policy's choice
  bool degraded = false;   // a smaller model served it instead (the controller's measure)
};

class Target {
 public:
  virtual ~Target() = default;
  // The model that answers (its name goes into responses; its tokenizer renders pieces).
  virtual const PoolModel& model() const = 0;
  // Encodes and checks the spec for this target; errors carry the field. An undecided target
  // (needs_decision()) first decides on the caller's thread (Probe, then Decide).
  virtual Result<PreparedRequests> Prepare(const GenerationSpec& spec) = 0;
  // Whether a choice must be made on the owner's thread before Prepare (a route's policy reads
  // and updates the router): then Probe computes what the choice reads (any thread), and
  // Decide makes it (the owner's thread). Errors carry the field, or say no model may serve.
  virtual bool needs_decision() const { return false; }
  virtual Result<PreparedRequests> Probe(const GenerationSpec& spec) const {
    (void)spec;
    return PreparedRequests{};
  }
  virtual Status Decide(const GenerationSpec& spec, const PreparedRequests& probe) {
    (void)spec, (void)probe;
    return Status::Ok();
  }
  // Submits every request; on error nothing stays submitted (and the error says why).
  virtual Status Start(PreparedRequests prepared, std::function<void()> notify) = 0;
  // The next releasable event of choice i, if any. Preconditions: started, i < choices.
  virtual bool Next(size_t choice, engine::TokenEvent* ev) = 0;
  // Cancels every unfinished choice; their last events (cancelled) still arrive.
  virtual void Cancel() = 0;

  // Whether events may be held back (then the response's headers wait for the first release).
  virtual bool holds_back() const { return false; }

  // Routed targets only (a plain model's are no-ops).
  // What the response says about its route.
  virtual std::optional<RouteInfo> route_info() const { return std::nullopt; }
  // Before Start: move to the route's next candidate (the baseline) because `reason` (its
  // admission refused the request, its engine stopped). Prepare again after it. Errors: no
  // candidate is left (the message names the models tried).
  virtual Status Fallback(const std::string& reason) {
    return Unavailable(reason);
  }
  // Every choice finished: the response's id (for feedback) and whether it failed.
  virtual void Finished(const std::string& response_id, bool error) { (void)response_id, (void)error; }

 protected:
  static Status Unavailable(const std::string& why) {
    return Status(StatusCode::kResourceExhausted, why);
  }
};

// One model's engine. With hold_back_tokens = k > 0, a choice's events are released only once
// it has produced k tokens or finished (nothing streams before); then as they come.
class EngineTarget final : public Target {
 public:
  explicit EngineTarget(PoolModel* model, int32_t hold_back_tokens = 0);
  ~EngineTarget() override;

  const PoolModel& model() const override { return *model_; }
  Result<PreparedRequests> Prepare(const GenerationSpec& spec) override;
  Status Start(PreparedRequests prepared, std::function<void()> notify) override;
  bool Next(size_t choice, engine::TokenEvent* ev) override;
  void Cancel() override;
  bool holds_back() const override { return hold_back_ > 0; }

 private:
  struct Choice {
    std::shared_ptr<engine::RequestStream> stream;
    std::deque<engine::TokenEvent> held;
    int32_t tokens = 0;      // token events seen
    bool released = false;   // hold-back over
    bool finished = false;   // its last event was seen
  };
  PoolModel* model_;
  const int32_t hold_back_;
  std::vector<Choice> choices_;
};

}  // namespace tarmac::router
