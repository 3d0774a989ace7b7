// ServerMetrics: the HTTP server's own series in the shared metrics::Registry (the engines and
// the model pool register theirs there too): responses by route and status code, requests
// refused before reaching an engine by reason, and the admission and connection gauges.
//
// Thread-safety: the counters may be updated from any thread. Watch's gauges read the
// admission state, which belongs to the I/O thread: render them there (the server's /metrics
// handler does).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "metrics/registry.h"
#include "router/admission.h"

namespace tarmac::server {

class ServerMetrics {
 public:
  explicit ServerMetrics(std::shared_ptr<metrics::Registry> registry);

  // Every HTTP response, by route ("/v1/completions", ..., "other") and status code.
  void CountResponse(const std::string& route, int status);
  // "queue_full", "rate_limited", "unauthorized", "draining", "timeout", "client_gone".
  void CountRejected(const std::string& reason);
  // Preconditions: both outlive this object.
  void Watch(const router::Admission* admission, const std::atomic<int64_t>* open_connections);

  metrics::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<metrics::Registry> registry_;
  metrics::Family<metrics::Counter>* responses_;
  metrics::Family<metrics::Counter>* rejected_;
  std::vector<metrics::CallbackHandle> gauges_;
};

}  // namespace tarmac::server
