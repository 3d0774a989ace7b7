// The server's side of the degradation controller (control/controller.h): applying its
// admission decision to a parsed generation request, before the request is prepared.
//
// Functions; call on the server's I/O thread (they count in ServerMetrics).
#pragma once

#include <optional>
#include <string>

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

}  // namespace tarmac::server
