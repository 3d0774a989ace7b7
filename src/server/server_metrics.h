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
#include "router/pool_model.h"

namespace tarmac::server {

class ServerMetrics {
 public:
  explicit ServerMetrics(std::shared_ptr<metrics::Registry> registry);

  // Every HTTP response, by route ("/v1/completions", ..., "other") and status code.
  void CountResponse(const std::string& route, int status);
  // "queue_full", "rate_limited", "tenant_limited", "unauthorized", "draining", "timeout", "client_gone",
  // "prepare_busy".
  void CountRejected(const std::string& reason);
  // Preconditions: all three outlive this object. preparing: requests on the prepare workers.
  void Watch(const router::Admission* admission, const std::atomic<int64_t>* open_connections,
             const std::atomic<int64_t>* preparing);
  // The series llm-d's endpoint picker scrapes, under vLLM's names, for one model (the picker
  // reads the first series of each, so a server registers them for one model only):
  // vllm:num_requests_waiting (engine queue + admission queue), vllm:num_requests_running,
  // vllm:kv_cache_usage_perc (fraction of KV blocks held by requests, 0..1), and
  // vllm:cache_config_info{block_size, num_gpu_blocks} = 1 (num_gpu_blocks: the KV pool's
  // blocks, wherever they live). Preconditions: the model and admission outlive this object;
  // called once (asserted).
  void WatchModelForPicker(const router::PoolModel* model, const router::Admission* admission);

  metrics::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<metrics::Registry> registry_;
  metrics::Family<metrics::Counter>* responses_;
  metrics::Family<metrics::Counter>* rejected_;
  std::vector<metrics::CallbackHandle> gauges_;
  bool picker_model_watched_ = false;
};

}  // namespace tarmac::server
