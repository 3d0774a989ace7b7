#include "server/server_metrics.h"

#include "base/check.h"

namespace tarmac::server {

ServerMetrics::ServerMetrics(std::shared_ptr<metrics::Registry> registry) : registry_(std::move(registry)) {
  TARMAC_CHECK(registry_ != nullptr);
  responses_ = &registry_->Counters("tarmac:http_requests_total", "HTTP responses by route and status code.",
                                    {"route", "code"});
  rejected_ = &registry_->Counters("tarmac:requests_rejected_total", "Requests refused before reaching an engine, by reason.",
                                   {"reason"});
}

void ServerMetrics::CountResponse(const std::string& route, int status) {
  responses_->With({route, std::to_string(status)}).Add();
}

void ServerMetrics::CountRejected(const std::string& reason) { rejected_->With({reason}).Add(); }

void ServerMetrics::Watch(const router::Admission* admission, const std::atomic<int64_t>* open_connections) {
  gauges_.push_back(registry_->Gauges("tarmac:server_requests_admitted", "Generation requests admitted to the engines.", {})
                        .Callback({}, [admission] { return static_cast<double>(admission->running()); }));
  gauges_.push_back(registry_->Gauges("tarmac:server_requests_queued", "Generation requests in the server's admission queue.", {})
                        .Callback({}, [admission] { return static_cast<double>(admission->queued()); }));
  gauges_.push_back(registry_->Gauges("tarmac:http_open_connections", "Open HTTP connections.", {})
                        .Callback({}, [open_connections] { return static_cast<double>(open_connections->load()); }));
}

}  // namespace tarmac::server
