// The response cache's two Targets (router/target.h):
// - RecordingTarget wraps the target a miss runs on, copies every event it releases, and when
//   every choice finished by stop or length (nothing failed, nothing cancelled) hands the
//   RecordedResponse to its sink, which stores it.
// - ReplayTarget answers a hit from a RecordedResponse without touching any engine: the same
//   events, through the same renderer, give the same body or chunks; usage counts the whole
//   prompt as cached (nothing was computed).
//
// Not thread-safe: one generation job owns each (as every Target; preparation as Target says:
// RecordingTarget's Probe is its inner target's, Prepare touches only itself and the inner one).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cache/recorded_response.h"
#include "router/pool_model.h"
#include "router/target.h"

namespace tarmac::cache {

class RecordingTarget final : public router::Target {
 public:
  using Sink = std::function<void(RecordedResponse)>;
  // Preconditions: inner != null.
  RecordingTarget(std::unique_ptr<router::Target> inner, Sink sink);

  const router::PoolModel& model() const override { return inner_->model(); }
  Result<router::PreparedRequests> Prepare(const router::GenerationSpec& spec) override;
  bool needs_decision() const override { return inner_->needs_decision(); }
  Result<router::PreparedRequests> Probe(const router::GenerationSpec& spec) const override { return inner_->Probe(spec); }
  Status Decide(const router::GenerationSpec& spec, const router::PreparedRequests& probe) override {
    return inner_->Decide(spec, probe);
  }
  Status Start(router::PreparedRequests prepared, std::function<void()> notify) override;
  bool Next(size_t choice, engine::TokenEvent* ev) override;
  void Cancel() override;
  bool holds_back() const override { return inner_->holds_back(); }
  std::optional<router::RouteInfo> route_info() const override { return inner_->route_info(); }
  Status Fallback(const std::string& reason) override { return inner_->Fallback(reason); }
  void Finished(const std::string& response_id, bool error) override;

 private:
  std::unique_ptr<router::Target> inner_;
  Sink sink_;
  RecordedResponse record_;
  bool cancelled_ = false;
};

class ReplayTarget final : public router::Target {
 public:
  // Preconditions: model is the recorded answering model (outlives this).
  ReplayTarget(const router::PoolModel* model, RecordedResponse recorded);

  const router::PoolModel& model() const override { return *model_; }
  Result<router::PreparedRequests> Prepare(const router::GenerationSpec& spec) override;
  Status Start(router::PreparedRequests prepared, std::function<void()> notify) override;
  bool Next(size_t choice, engine::TokenEvent* ev) override;
  void Cancel() override {}
  std::optional<router::RouteInfo> route_info() const override { return route_; }

 private:
  const router::PoolModel* model_;
  RecordedResponse rec_;
  std::optional<router::RouteInfo> route_;
  std::vector<size_t> next_;  // [choices] next event to release
};

}  // namespace tarmac::cache
