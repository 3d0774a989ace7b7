// RouteDegrader: the router's side of the controller's "route to the smaller model" measure.
// The controller asks whether a model's routes let its lowest SLA tiers (SloTargets::IsLowest)
// go to a smaller model, and switches that on while the model is degraded on a protected
// tier's SLO, off when it recovers. server::RouterDegrader implements it over the router
// (router::Router::SetRouteSmaller); without routes there is none and the controller never
// plans the measure.
//
// Implementations must be thread-safe: the controller calls from its own thread.
#pragma once

#include <string>

namespace tarmac::control {

class RouteDegrader {
 public:
  virtual ~RouteDegrader() = default;
  // Whether a route lets requests of `model`'s lowest tiers be answered by a smaller model.
  virtual bool CanRouteSmaller(const std::string& model) const = 0;
  // Sends (on) or stops sending (off) those requests to the smaller model.
  virtual void SetRouteSmaller(const std::string& model, bool on) = 0;
};

}  // namespace tarmac::control
