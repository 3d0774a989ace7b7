#include "server/server_metrics.h"

#include <functional>

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

void ServerMetrics::Watch(const router::Admission* admission, const std::atomic<int64_t>* open_connections,
                          const std::atomic<int64_t>* preparing) {
  gauges_.push_back(registry_->Gauges("tarmac:server_requests_preparing",
                                      "Requests being prepared off the I/O thread (template, tokenizer, grammar), or waiting to be.", {})
                        .Callback({}, [preparing] { return static_cast<double>(preparing->load()); }));
  gauges_.push_back(registry_->Gauges("tarmac:server_requests_admitted", "Generation requests admitted to the engines.", {})
                        .Callback({}, [admission] { return static_cast<double>(admission->running()); }));
  gauges_.push_back(registry_->Gauges("tarmac:server_requests_queued", "Generation requests in the server's admission queue.", {})
                        .Callback({}, [admission] { return static_cast<double>(admission->queued()); }));
  gauges_.push_back(registry_->Gauges("tarmac:http_open_connections", "Open HTTP connections.", {})
                        .Callback({}, [open_connections] { return static_cast<double>(open_connections->load()); }));
}

void ServerMetrics::WatchModelForPicker(const router::PoolModel* model, const router::Admission* admission) {
  TARMAC_CHECK(!picker_model_watched_);
  picker_model_watched_ = true;
  const metrics::LabelValues m = {model->name};
  const engine::EngineClient* e = model->engine.get();
  auto gauge = [&](const char* name, const char* help, std::function<double()> fn) {
    gauges_.push_back(registry_->Gauges(name, help, {"model_name"}).Callback(m, std::move(fn)));
  };
  gauge("vllm:num_requests_waiting", "Requests waiting (engine queue plus admission queue).",
        [e, admission, name = model->name] { return static_cast<double>(e->num_waiting() + admission->queued(name)); });
  gauge("vllm:num_requests_running", "Requests in model execution batches.",
        [e] { return static_cast<double>(e->Stats().num_running); });
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage: fraction of KV blocks held by requests (1 = full).",
        [e] { return e->Stats().kv_usage(); });
  const engine::EngineConfig& c = e->config();
  gauges_.push_back(registry_->Gauges("vllm:cache_config_info", "Information of the KV cache's configuration.",
                                      {"block_size", "num_gpu_blocks"})
                        .Callback({std::to_string(c.sched.block_size), std::to_string(c.kv.blocks)}, [] { return 1.0; }));
}

}  // namespace tarmac::server
