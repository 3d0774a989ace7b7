// GET /v1/slo: the SLO report (control/slo_report.h) as JSON. Session::HandleSlo lives here so
// the route stays one branch in http_session.cc.
#include "base/clock.h"
#include "control/slo_report.h"
#include "server/openai_render.h"
#include "server/server_internal.h"

namespace tarmac::server {

void Session::HandleSlo() {
  const control::SloReport r = control::BuildSloReport(*srv_->config().metrics, srv_->config().slo_tracker.get(),
                                                       srv_->config().controller.get(), NowSeconds());
  Respond(200, "application/json", DumpJson(control::ToJson(r)));
}

}  // namespace tarmac::server
