// Prometheus metrics of the server, named after vLLM's (prefix `tarmac:` instead of `vllm:`) so
// existing dashboards and the Gateway API Inference Extension can scrape them. Request-level
// histograms and counters carry the labels model_name, prompt_band, output_band and
// priority_class (the request bucket, fixed when the request arrives); engine gauges and
// counters carry model_name. The README section "HTTP API and metrics" lists every name.
//
// Not thread-safe: owned and used by the server's I/O thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/engine_types.h"

namespace tarmac::server {

struct RequestBucket {
  std::string model;
  std::string prompt_band;     // prompt tokens: 0-127, 128-511, 512-2047, 2048+
  std::string output_band;     // max_tokens: 1-63, 64-255, 256-1023, 1024+
  std::string priority_class;  // high (< 0), normal (0), low (> 0)
  bool operator<(const RequestBucket& o) const {
    return std::tie(model, prompt_band, output_band, priority_class) <
           std::tie(o.model, o.prompt_band, o.output_band, o.priority_class);
  }
};
RequestBucket MakeBucket(const std::string& model, int64_t prompt_tokens, int64_t max_tokens, int32_t priority);

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void Observe(double x);
  // Appends the _bucket/_sum/_count lines of `name` with `labels` ("k=\"v\",...", no braces).
  void Render(const std::string& name, const std::string& labels, std::string* out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct ModelSnapshot {
  std::string model;
  engine::EngineStats stats;
  int32_t server_queued = 0;  // requests of this model waiting in the server's admission queue
};

class ServerMetrics {
 public:
  // A generation request (one choice) ended.
  void ObserveRequest(const RequestBucket& b, const engine::RequestMetrics& m, engine::FinishReason reason);
  // Every HTTP response, by route ("/v1/completions", ..., "other") and status code.
  void CountResponse(const std::string& route, int status);
  void CountRejected(const std::string& reason);  // "queue_full", "rate_limited", "draining", ...

  // The whole exposition text.
  std::string Render(const std::vector<ModelSnapshot>& models, int32_t admitted, int32_t queued,
                     int64_t open_connections) const;

 private:
  struct PerBucket {
    PerBucket();
    Histogram ttft, itl, tpot, e2e, queue, prompt_tokens, generation_tokens;
    std::map<std::string, uint64_t> finished;  // finished_reason -> count
  };
  std::map<RequestBucket, PerBucket> buckets_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  std::map<std::string, uint64_t> rejected_;
};

}  // namespace tarmac::server
