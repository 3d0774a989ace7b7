// `tarmac report --url URL`: fetches a server's SLO report (GET /v1/slo) and prints it as a
// table (control/slo_table.h): per model its KV and cache state, the controller's state,
// measures and latest actions, then per request bucket TTFT / TPOT / e2e / queue percentiles,
// tokens/s, SLO attainment and speculation counts over the window and since start.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/http_client.h"
#include "control/slo_table.h"

namespace tarmac::apps {
namespace {

struct ReportArgs {
  std::string url = "http://127.0.0.1:8080";
  std::string api_key;
  double timeout_s = 30;
  bool json = false;
  bool window_only = false;
};

int RunReport(const ReportArgs& a) {
  HttpTarget t;
  if (!ParseHttpUrl(a.url, &t)) {
    std::fprintf(stderr, "tarmac report: --url '%s': expected http://HOST:PORT\n", a.url.c_str());
    return 2;
  }
  auto [status, body] = HttpGet(t, "/v1/slo", a.api_key, a.timeout_s);
  if (status == 0) {
    std::fprintf(stderr, "tarmac report: no answer from %s (is the server running?)\n", a.url.c_str());
    return 1;
  }
  if (status != 200) {
    std::fprintf(stderr, "tarmac report: GET %s/v1/slo answered %d: %s\n", a.url.c_str(), status, body.substr(0, 300).c_str());
    return 1;
  }
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("object", "") != "slo_report") {
    std::fprintf(stderr, "tarmac report: %s/v1/slo did not answer an SLO report\n", a.url.c_str());
    return 1;
  }
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", control::RenderSloTable(j, a.window_only ? control::SloSpans::kWindow : control::SloSpans::kBoth).c_str());
  }
  return 0;
}

}  // namespace

void RegisterReport(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand("report", "print a running server's per-bucket SLO report (GET /v1/slo)");
  cmd->add_option("--url", a->url, "server base URL (http://HOST:PORT)")->capture_default_str();
  cmd->add_option("--api-key", a->api_key, "sent as 'Authorization: Bearer KEY'");
  cmd->add_option("--timeout", a->timeout_s, "seconds to wait for the answer")->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--json", a->json, "print the report's JSON instead of the table");
  cmd->add_flag("--window-only", a->window_only, "only the window rows (not since start)");
  cmd->callback([a, run] { *run = [a] { return RunReport(*a); }; });
}

}  // namespace tarmac::apps
