#include "engine/engine_metrics.h"

#include <string>

#include "base/check.h"
#include "base/clock.h"

namespace tarmac::engine {
namespace {

const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                         0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kItlBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
                                        0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0};
const std::vector<double> kE2eBounds = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                                        30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
const std::vector<double> kTokenBounds = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};
constexpr double kWindowSeconds = 60.0;
const std::vector<double> kWindowQuantiles = {0.5, 0.95, 0.99};

std::vector<std::string> ModelLabel() { return {"model_name"}; }
std::vector<std::string> BucketLabels(std::vector<std::string> extra = {}) {
  std::vector<std::string> l = {"model_name"};
  for (const std::string& n : metrics::BucketTable::LabelNames()) l.push_back(n);
  for (std::string& e : extra) l.push_back(std::move(e));
  return l;
}
metrics::LabelValues With(metrics::LabelValues v, std::string extra) {
  v.push_back(std::move(extra));
  return v;
}

}  // namespace

EngineMetrics::EngineMetrics(std::shared_ptr<metrics::Registry> registry, std::string model_name)
    : registry_(std::move(registry)), model_name_(std::move(model_name)) {
  TARMAC_CHECK(registry_ != nullptr);
  metrics::Registry& r = *registry_;
  const metrics::LabelValues m = {model_name_};
  prompt_tokens_ = &r.Counters("tarmac:prompt_tokens_total", "Prompt tokens of finished requests.", ModelLabel()).With(m);
  generation_tokens_ = &r.Counters("tarmac:generation_tokens_total", "Generated tokens.", ModelLabel()).With(m);
  steps_ = &r.Counters("tarmac:engine_steps_total", "Engine steps.", ModelLabel()).With(m);
  draft_seconds_ = &r.Counters("tarmac:spec_decode_draft_seconds_total",
                               "Seconds spent drafting (speculative decoding).", ModelLabel()).With(m);
  verify_seconds_ = &r.Counters("tarmac:spec_decode_verify_seconds_total",
                                "Seconds of target steps that verified drafts.", ModelLabel()).With(m);
  events_dropped_ = &r.Counters("tarmac:kv_events_dropped_total",
                                "Prefix-cache events dropped because nobody drained them in time.", ModelLabel()).With(m);
  const std::vector<std::string> bl = BucketLabels();
  f_ttft_ = &r.Histograms("tarmac:time_to_first_token_seconds", "Time to first token (arrival at the engine to first token).", bl, kTtftBounds);
  f_itl_ = &r.Histograms("tarmac:inter_token_latency_seconds", "Gaps between consecutive output tokens.", bl, kItlBounds);
  f_tpot_ = &r.Histograms("tarmac:time_per_output_token_seconds", "Mean time per output token after the first, per request.", bl, kItlBounds);
  f_e2e_ = &r.Histograms("tarmac:e2e_request_latency_seconds", "End-to-end request latency in the engine.", bl, kE2eBounds);
  f_queue_ = &r.Histograms("tarmac:request_queue_time_seconds", "Time from engine arrival to first scheduling.", bl, kE2eBounds);
  f_prompt_ = &r.Histograms("tarmac:request_prompt_tokens", "Prompt tokens per request.", bl, kTokenBounds);
  f_generation_ = &r.Histograms("tarmac:request_generation_tokens", "Generated tokens per request.", bl, kTokenBounds);
  f_finished_ = &r.Counters("tarmac:request_success_total", "Finished requests by finished_reason (stop, length, abort, error).",
                            BucketLabels({"finished_reason"}));
  auto window = [&](const char* name, const char* help) {
    return &r.Windows(name, help, bl, kWindowSeconds, kWindowQuantiles);
  };
  f_w_ttft_ = window("tarmac:window_time_to_first_token_seconds", "Time to first token over the last 60 s.");
  f_w_tpot_ = window("tarmac:window_time_per_output_token_seconds", "Time per output token over the last 60 s.");
  f_w_e2e_ = window("tarmac:window_e2e_request_latency_seconds", "End-to-end latency over the last 60 s.");
  f_w_queue_ = window("tarmac:window_request_queue_time_seconds", "Queue time over the last 60 s.");
  f_drafts_ = &r.Counters("tarmac:spec_decode_num_drafts_total", "Verify steps that checked at least one draft token.", bl);
  f_draft_tokens_ = &r.Counters("tarmac:spec_decode_num_draft_tokens_total", "Draft tokens proposed.", bl);
  f_accepted_ = &r.Counters("tarmac:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.", bl);
  f_accepted_at_ = &r.Counters("tarmac:spec_decode_num_accepted_tokens_per_pos_total",
                               "Draft tokens accepted at each draft position (0-based).", BucketLabels({"position"}));
  f_decisions_ = &r.Counters("tarmac:spec_decode_decisions_total", "Policy decisions (requests considered for speculation).", bl);
  f_fallbacks_ = &r.Counters("tarmac:spec_decode_fallbacks_total", "Decisions that switched speculation off (k = 0).", bl);
  f_acceptance_rate_ = &r.Gauges("tarmac:spec_decode_acceptance_rate", "Accepted / proposed draft tokens.", bl);
  f_mean_accepted_ = &r.Gauges("tarmac:spec_decode_mean_accepted_length", "Accepted draft tokens per verify step.", bl);
}

EngineMetrics::~EngineMetrics() { Unwatch(); }

void EngineMetrics::Watch(const sched::Scheduler* s) {
  metrics::Registry& r = *registry_;
  const metrics::LabelValues m = {model_name_};
  auto gauge = [&](const char* name, const char* help, std::function<double()> fn) {
    watched_.push_back(r.Gauges(name, help, ModelLabel()).Callback(m, std::move(fn)));
  };
  auto counter = [&](const char* name, const char* help, std::function<double()> fn) {
    watched_.push_back(r.Counters(name, help, ModelLabel()).Callback(m, std::move(fn)));
  };
  gauge("tarmac:num_requests_running", "Requests in model execution batches (holding KV).",
        [s] { return static_cast<double>(s->num_running()); });
  gauge("tarmac:kv_cache_usage_perc", "Fraction of KV blocks held by requests (1 = full).", [s] {
    const sched::KvUsage u = s->Usage();
    return u.total_blocks == 0 ? 0.0 : static_cast<double>(u.request_blocks) / u.total_blocks;
  });
  gauge("tarmac:kv_cache_blocks_total", "KV blocks in the pool.", [s] { return double(s->Usage().total_blocks); });
  gauge("tarmac:kv_cache_free_blocks", "KV blocks free.", [s] { return double(s->Usage().free_blocks); });
  gauge("tarmac:kv_cache_request_blocks", "KV blocks held by at least one request.",
        [s] { return double(s->Usage().request_blocks); });
  gauge("tarmac:kv_cache_cached_blocks", "KV blocks held only by the prefix cache.",
        [s] { return double(s->Usage().cached_only_blocks); });
  gauge("tarmac:kv_cache_fragmentation", "Unused fraction of token slots in blocks held by running requests.",
        [s] { return s->Usage().fragmentation(); });
  counter("tarmac:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          [s] { return double(s->counters().prefix_queried_tokens); });
  counter("tarmac:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
          [s] { return double(s->counters().prefix_hit_tokens); });
  counter("tarmac:prefix_cache_evicted_blocks_total", "Cached KV blocks evicted.",
          [s] { return double(s->counters().evicted_blocks); });
  counter("tarmac:num_preemptions_total", "Preemptions (recompute) of running requests.",
          [s] { return double(s->counters().preemptions); });
}

void EngineMetrics::WatchExperts(int32_t n_layer, int32_t n_expert,
                                 std::function<std::vector<int64_t>()> counts) {
  metrics::Registry& r = *registry_;
  auto window = std::make_shared<ExpertLoadWindow>(n_layer, n_expert);
  auto load = [window, counts = std::move(counts)] { return window->Observe(NowSeconds(), counts()); };
  watched_.push_back(
      r.Gauges("tarmac:moe_expert_load_max_over_mean",
               "Mixture of experts, last 60 s: per layer the busiest expert's tokens over the mean "
               "per expert, averaged over layers (1 = even).",
               ModelLabel())
          .Callback({model_name_}, [load] { return load().max_over_mean; }));
  watched_.push_back(
      r.Gauges("tarmac:moe_hot_expert_share",
               "Mixture of experts, last 60 s: share of routed tokens taken by the hottest 10% of "
               "experts, averaged over layers (0.1 = even).",
               ModelLabel())
          .Callback({model_name_}, [load] { return load().hot_share; }));
}

void EngineMetrics::Unwatch() { watched_.clear(); }

EngineMetrics::PerBucket& EngineMetrics::Bucket(metrics::BucketId b) {
  TARMAC_CHECK(b >= 0);
  if (static_cast<size_t>(b) < buckets_.size() && buckets_[static_cast<size_t>(b)]) return *buckets_[static_cast<size_t>(b)];
  auto p = std::make_unique<PerBucket>();
  p->labels = {model_name_};
  for (const std::string& v : registry_->buckets().LabelValues(b)) p->labels.push_back(v);
  p->ttft = &f_ttft_->With(p->labels);
  p->itl = &f_itl_->With(p->labels);
  p->tpot = &f_tpot_->With(p->labels);
  p->e2e = &f_e2e_->With(p->labels);
  p->queue = &f_queue_->With(p->labels);
  p->prompt_tokens = &f_prompt_->With(p->labels);
  p->generation_tokens = &f_generation_->With(p->labels);
  p->w_ttft = &f_w_ttft_->With(p->labels);
  p->w_tpot = &f_w_tpot_->With(p->labels);
  p->w_e2e = &f_w_e2e_->With(p->labels);
  p->w_queue = &f_w_queue_->With(p->labels);
  for (int i = 0; i < kFinishReasons; ++i)
    p->finished[static_cast<size_t>(i)] =
        &f_finished_->With(With(p->labels, FinishReasonName(static_cast<FinishReason>(i + 1))));
  if (static_cast<size_t>(b) >= buckets_.size()) buckets_.resize(static_cast<size_t>(b) + 1);
  PerBucket& out = *p;
  buckets_[static_cast<size_t>(b)] = std::move(p);
  std::lock_guard<std::mutex> lock(index_mu_);
  index_[b] = &out;
  return out;
}

EngineMetrics::SpecSeries& EngineMetrics::Spec(PerBucket& p) {
  if (SpecSeries* s = p.spec.load(std::memory_order_acquire)) return *s;
  auto s = std::make_unique<SpecSeries>();
  s->drafts = &f_drafts_->With(p.labels);
  s->draft_tokens = &f_draft_tokens_->With(p.labels);
  s->accepted = &f_accepted_->With(p.labels);
  s->decisions = &f_decisions_->With(p.labels);
  s->fallbacks = &f_fallbacks_->With(p.labels);
  const metrics::Counter* acc = s->accepted;
  const metrics::Counter* tok = s->draft_tokens;
  const metrics::Counter* dr = s->drafts;
  s->acceptance_rate = f_acceptance_rate_->Callback(p.labels, [acc, tok] { return tok->value() > 0 ? acc->value() / tok->value() : 0.0; });
  s->mean_accepted_length = f_mean_accepted_->Callback(p.labels, [acc, dr] { return dr->value() > 0 ? acc->value() / dr->value() : 0.0; });
  SpecSeries* raw = s.get();
  p.spec_owner = std::move(s);
  p.spec.store(raw, std::memory_order_release);
  return *raw;
}

void EngineMetrics::RequestFinished(const RequestMetrics& m, FinishReason reason, double now_s) {
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    finished_.fetch_add(1, std::memory_order_relaxed);
  } else {
    cancelled_.fetch_add(1, std::memory_order_relaxed);
  }
  prompt_tokens_->Add(m.prompt_tokens);
  if (m.bucket == metrics::kNoBucket) return;
  PerBucket& p = Bucket(m.bucket);
  p.finished[static_cast<size_t>(FinishReasonIndex(reason))]->Add();
  p.e2e->Observe(m.e2e_s);
  p.w_e2e->Observe(m.e2e_s, now_s);
  p.queue->Observe(m.queue_s);
  p.w_queue->Observe(m.queue_s, now_s);
  p.prompt_tokens->Observe(m.prompt_tokens);
  p.generation_tokens->Observe(m.output_tokens);
  if (m.output_tokens > 0) {
    p.ttft->Observe(m.ttft_s);
    p.w_ttft->Observe(m.ttft_s, now_s);
  }
  p.itl->ObserveAll(m.itl_s);
  if (m.output_tokens > 1) {
    const double tpot = (m.e2e_s - m.ttft_s) / (m.output_tokens - 1);
    p.tpot->Observe(tpot);
    p.w_tpot->Observe(tpot, now_s);
  }
}

void EngineMetrics::SpecDecision(metrics::BucketId b, int32_t k) {
  SpecSeries& s = Spec(Bucket(b));
  s.decisions->Add();
  if (k == 0) s.fallbacks->Add();
}

void EngineMetrics::SpecVerified(metrics::BucketId b, int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  PerBucket& p = Bucket(b);
  SpecSeries& s = Spec(p);
  s.drafts->Add();
  s.draft_tokens->Add(proposed);
  s.accepted->Add(accepted);
  for (int32_t i = 0; i < accepted && i < speculative::kMaxDraft; ++i) {
    metrics::Counter* c = s.accepted_at[static_cast<size_t>(i)].load(std::memory_order_acquire);
    if (c == nullptr) {
      c = &f_accepted_at_->With(With(p.labels, std::to_string(i)));
      s.accepted_at[static_cast<size_t>(i)].store(c, std::memory_order_release);
    }
    c->Add();
  }
}

SpecCounts EngineMetrics::Read(const SpecSeries& s) {
  SpecCounts c;
  c.decisions = static_cast<int64_t>(s.decisions->value());
  c.fallbacks = static_cast<int64_t>(s.fallbacks->value());
  c.drafts = static_cast<int64_t>(s.drafts->value());
  c.draft_tokens = static_cast<int64_t>(s.draft_tokens->value());
  c.accepted_tokens = static_cast<int64_t>(s.accepted->value());
  for (const auto& a : s.accepted_at) {
    const metrics::Counter* p = a.load(std::memory_order_acquire);
    if (p == nullptr) break;
    c.accepted_at.push_back(static_cast<int64_t>(p->value()));
  }
  return c;
}

std::map<metrics::BucketId, SpecCounts> EngineMetrics::SpecByBucket() const {
  std::map<metrics::BucketId, SpecCounts> out;
  std::lock_guard<std::mutex> lock(index_mu_);
  for (const auto& [b, p] : index_) {
    if (const SpecSeries* s = p->spec.load(std::memory_order_acquire)) out[b] = Read(*s);
  }
  return out;
}

SpecCounts EngineMetrics::Spec(metrics::BucketId b) const {
  std::lock_guard<std::mutex> lock(index_mu_);
  auto it = index_.find(b);
  if (it == index_.end()) return {};
  const SpecSeries* s = it->second->spec.load(std::memory_order_acquire);
  return s ? Read(*s) : SpecCounts{};
}

SpecCounts EngineMetrics::SpecTotal() const {
  SpecCounts t;
  for (const auto& [b, c] : SpecByBucket()) t.Add(c);
  return t;
}

}  // namespace tarmac::engine
