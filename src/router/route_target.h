// RouteTarget: a request for a route. Prepare computes the request's features (the route's
// baseline encodes the prompt), asks the route's policy, and prepares the chosen model's target
// (an EngineTarget, or a CascadeTarget; a request a cascade may not answer,
// GenerationSpec::cascadable(), goes to the cascade's large model); Fallback moves to the
// baseline. What it decided and
// how it ended go back to the Router (metrics, feedback, implicit scores).
//
// Not thread-safe: one generation job on the server's I/O thread owns it; Probe (the
// baseline's encoding, const) may run on any thread, and Prepare once decided on the thread the
// job hands the target to (Target).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "router/cascade_target.h"
#include "router/router.h"

namespace tarmac::router {

class RouteTarget final : public Target {
 public:
  // Preconditions: router and route outlive the target.
  RouteTarget(Router* router, const Router::Route* route, std::string tenant);

  const PoolModel& model() const override;
  Result<PreparedRequests> Prepare(const GenerationSpec& spec) override;
  bool needs_decision() const override { return !decided_; }
  // The baseline's prepared requests: the features count the prompt with its tokenizer.
  Result<PreparedRequests> Probe(const GenerationSpec& spec) const override;
  // Computes the features from the probe, asks the policy, and picks the target that runs.
  Status Decide(const GenerationSpec& spec, const PreparedRequests& probe) override;
  Status Start(PreparedRequests prepared, std::function<void()> notify) override;
  bool Next(size_t choice, engine::TokenEvent* ev) override { return inner_->Next(choice, ev); }
  void Cancel() override { inner_->Cancel(); }
  bool holds_back() const override { return inner_ != nullptr && inner_->holds_back(); }
  std::optional<RouteInfo> route_info() const override;
  Status Fallback(const std::string& reason) override;
  void Finished(const std::string& response_id, bool error) override;

  const RouteFeatures& features() const { return features_; }

 private:
  Status UseModel(const std::string& model);

  Router* router_;
  const Router::Route* route_;
  PoolModel* base_;          // the route's baseline, resolved when made (null: not served)
  std::string tenant_;
  GenerationSpec spec_;      // the request's, with the features' task, SLA tier and risk
  RouteFeatures features_;
  bool decided_ = false;
  RouteInfo info_;
  std::vector<std::string> tried_;  // models given up on, in order
  std::unique_ptr<Target> inner_;
  CascadeTarget* cascade_ = nullptr;  // inner_ when it is one
  PoolModel* model_ = nullptr;        // the model running first
};

}  // namespace tarmac::router
