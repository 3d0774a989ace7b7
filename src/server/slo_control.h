// The server's side of the degradation controller (control/controller.h): applying its
// admission decision to a parsed generation request, before the request is prepared.
//
// Functions; call on the server's I/O thread (they count in ServerMetrics).
#pragma once

#include <optional>
#include <string>

#include "control/route_degrader.h"
#include "control/slo_targets.h"
#include "router/router.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/server_metrics.h"

namespace tarmac::control {
class Controller;
}

namespace tarmac::server {

// With no controller: nothing (admission exactly as without one). Otherwise asks it about the
// model that answers for the request (`model`: the one it names, or its route's baseline) and
// its SLA tier: a shed tier is a 429 with Retry-After (counted as rejected,
// reason "shed"); a capped tier's max_tokens is lowered to the cap (its default too); a
// deprioritized tier's priority is raised to the low class (a larger value) if below it.
std::optional<ApiError> ApplyController(const control::Controller* controller, const std::string& model,
                                        GenRequest* req, ServerMetrics* metrics);

// The router as the controller's RouteDegrader: the lowest SLA tiers (targets.IsLowest) of a
// degraded model's routed requests go to a smaller model of the same route (Router::
// SetRouteSmaller). Thread-safe as the router's calls are. Preconditions: router outlives it.
class RouterDegrader final : public control::RouteDegrader {
 public:
  RouterDegrader(router::Router* router, const control::SloTargets& targets);
  bool CanRouteSmaller(const std::string& model) const override { return router_->HasSmallerModel(model); }
  void SetRouteSmaller(const std::string& model, bool on) override { router_->SetRouteSmaller(model, on); }

 private:
  router::Router* router_;
};

}  // namespace tarmac::server
