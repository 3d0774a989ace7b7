// EngineMetrics: one engine's series in a metrics::Registry, named after vLLM's with the prefix
// `tarmac:`. Per model (label model_name): step, token and speculation-time counters it owns,
// and the KV and prefix-cache gauges and counters the scheduler keeps, computed when read.
// Per model and request bucket (model_name + metrics::BucketTable::LabelNames()): the request
// histograms, sliding-window quantiles (last 60 s) and request_success_total{finished_reason},
// recorded when a request finishes; and the speculation counts, recorded as the policy decides
// and drafts are verified. A bucket's series are created on its first event.
//
// Thread-safety: the recording methods are called from the engine's step thread only; the
// reading methods (Spec*, and everything through the registry) from any thread. Watch's
// callbacks read the scheduler's atomic counts; they are removed before the watched scheduler
// goes (~EngineMetrics, or Unwatch).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_types.h"
#include "engine/expert_load.h"
#include "metrics/registry.h"
#include "sched/scheduler.h"
#include "speculative/spec_policy.h"

namespace tarmac::engine {

class EngineMetrics {
 public:
  EngineMetrics(std::shared_ptr<metrics::Registry> registry, std::string model_name);
  ~EngineMetrics();
  EngineMetrics(const EngineMetrics&) = delete;
  EngineMetrics& operator=(const EngineMetrics&) = delete;

  // Step thread.
  void RequestFinished(const RequestMetrics& m, FinishReason reason, double now_s);
  void SpecDecision(metrics::BucketId b, int32_t k);  // the policy chose k (0: a fallback)
  void SpecVerified(metrics::BucketId b, int32_t proposed, int32_t accepted);
  void StepDone() { steps_->Add(); }
  void TokenSampled() { generation_tokens_->Add(); }
  void DraftSeconds(double s) { draft_seconds_->Add(s); }
  void VerifySeconds(double s) { verify_seconds_->Add(s); }
  void EventsDropped(int64_t n) { events_dropped_->Add(static_cast<double>(n)); }
  // Registers the scheduler-backed series (its counts are read when the registry is).
  // Preconditions: `s` outlives this object or Unwatch() is called first.
  void Watch(const sched::Scheduler* s);
  // A mixture of experts' load balance (ExpertLoadWindow over the last 60 s):
  // tarmac:moe_expert_load_max_over_mean and tarmac:moe_hot_expert_share. counts() returns
  // the model's cumulative [n_layer][n_expert] counts, from any thread; it must stay callable
  // until Unwatch.
  void WatchExperts(int32_t n_layer, int32_t n_expert, std::function<std::vector<int64_t>()> counts);
  void Unwatch();

  // Any thread.
  SpecCounts Spec(metrics::BucketId b) const;
  std::map<metrics::BucketId, SpecCounts> SpecByBucket() const;
  SpecCounts SpecTotal() const;
  double steps() const { return steps_->value(); }
  double generation_tokens() const { return generation_tokens_->value(); }
  double prompt_tokens() const { return prompt_tokens_->value(); }
  double draft_seconds() const { return draft_seconds_->value(); }
  double verify_seconds() const { return verify_seconds_->value(); }
  double events_dropped() const { return events_dropped_->value(); }
  int64_t requests_finished() const { return finished_.load(std::memory_order_relaxed); }
  int64_t requests_cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  const std::string& model_name() const { return model_name_; }
  metrics::Registry& registry() { return *registry_; }

 private:
  struct SpecSeries {
    metrics::Counter *decisions, *fallbacks, *drafts, *draft_tokens, *accepted;
    std::array<std::atomic<metrics::Counter*>, speculative::kMaxDraft> accepted_at{};  // on first use
    metrics::CallbackHandle acceptance_rate, mean_accepted_length;
  };
  struct PerBucket {
    metrics::LabelValues labels;  // model_name + the bucket's
    metrics::Histogram *ttft, *itl, *tpot, *e2e, *queue, *prompt_tokens, *generation_tokens;
    metrics::WindowQuantiles *w_ttft, *w_tpot, *w_e2e, *w_queue;
    std::array<metrics::Counter*, kFinishReasons> finished;  // by FinishReasonIndex
    std::atomic<SpecSeries*> spec{nullptr};
    std::unique_ptr<SpecSeries> spec_owner;
  };
  PerBucket& Bucket(metrics::BucketId b);
  SpecSeries& Spec(PerBucket& p);
  static SpecCounts Read(const SpecSeries& s);

  std::shared_ptr<metrics::Registry> registry_;
  const std::string model_name_;
  // Per-bucket families, registered up front so /metrics lists them before any request.
  metrics::Family<metrics::Histogram> *f_ttft_, *f_itl_, *f_tpot_, *f_e2e_, *f_queue_, *f_prompt_, *f_generation_;
  metrics::Family<metrics::WindowQuantiles> *f_w_ttft_, *f_w_tpot_, *f_w_e2e_, *f_w_queue_;
  metrics::Family<metrics::Counter> *f_finished_, *f_drafts_, *f_draft_tokens_, *f_accepted_, *f_accepted_at_,
      *f_decisions_, *f_fallbacks_;
  metrics::Family<metrics::Gauge> *f_acceptance_rate_, *f_mean_accepted_;
  metrics::Counter *steps_, *generation_tokens_, *prompt_tokens_, *draft_seconds_, *verify_seconds_,
      *events_dropped_;
  std::atomic<int64_t> finished_{0}, cancelled_{0};
  std::vector<std::unique_ptr<PerBucket>> buckets_;  // by bucket id; step thread only
  mutable std::mutex index_mu_;                      // guards index_ (readers on other threads)
  std::map<metrics::BucketId, const PerBucket*> index_;
  std::vector<metrics::CallbackHandle> watched_;     // last: removed first
};

}  // namespace tarmac::engine
