#include "server/slo_control.h"

#include <algorithm>

#include <fmt/format.h>

#include "control/controller.h"
#include "metrics/request_bucket.h"

namespace tarmac::server {

std::optional<ApiError> ApplyController(const control::Controller* controller, const std::string& model,
                                        GenRequest* req, ServerMetrics* metrics) {
  if (controller == nullptr) return std::nullopt;
  const std::string tier = req->spec.sla.empty() ? std::string(metrics::kDefaultSla) : req->spec.sla;
  const control::AdmitDecision d = controller->Admit(model, tier);
  if (d.shed) {
    metrics->CountRejected("shed");
    return TooManyRequests(fmt::format("the server is shedding SLA tier '{}' to keep higher tiers within their SLO "
                                       "({}); retry later", tier, d.reason),
                           d.retry_after_s, "slo_shed");
  }
  if (d.min_priority != INT32_MIN) req->spec.priority = std::max(req->spec.priority, d.min_priority);
  if (d.max_tokens_cap > 0) req->spec.max_tokens = std::min(req->spec.max_tokens.value_or(d.max_tokens_cap), d.max_tokens_cap);
  return std::nullopt;
}

RouterDegrader::RouterDegrader(router::Router* router, const control::SloTargets& targets) : router_(router) {
  router_->SetLowestTiers([targets](std::string_view sla) { return targets.IsLowest(sla); });
}

}  // namespace tarmac::server
