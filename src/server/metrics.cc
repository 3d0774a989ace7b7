#include "server/metrics.h"

#include <fmt/format.h>

namespace tarmac::server {
namespace {

const std::vector<double> kTtftBounds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                         0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kItlBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
                                        0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0};
const std::vector<double> kE2eBounds = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                                        30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0};
const std::vector<double> kTokenBounds = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};

std::string Escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

std::string Labels(const RequestBucket& b) {
  return fmt::format("model_name=\"{}\",prompt_band=\"{}\",output_band=\"{}\",priority_class=\"{}\"",
                     Escape(b.model), b.prompt_band, b.output_band, b.priority_class);
}

std::string Num(double v) { return fmt::format("{}", v); }

void Header(std::string* out, const char* name, const char* type, const char* help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

RequestBucket MakeBucket(const std::string& model, int64_t prompt_tokens, int64_t max_tokens, int32_t priority) {
  RequestBucket b;
  b.model = model;
  b.prompt_band = prompt_tokens < 128 ? "0-127" : prompt_tokens < 512 ? "128-511" : prompt_tokens < 2048 ? "512-2047" : "2048+";
  b.output_band = max_tokens < 64 ? "1-63" : max_tokens < 256 ? "64-255" : max_tokens < 1024 ? "256-1023" : "1024+";
  b.priority_class = priority < 0 ? "high" : priority == 0 ? "normal" : "low";
  return b;
}

void Histogram::Observe(double x) {
  size_t i = 0;
  while (i < bounds_.size() && x > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += x;
  count_++;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    *out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, Num(bounds_[i]), cum);
  }
  cum += counts_.back();
  *out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, cum);
  *out += fmt::format("{}_sum{{{}}} {}\n", name, labels, Num(sum_));
  *out += fmt::format("{}_count{{{}}} {}\n", name, labels, count_);
}

ServerMetrics::PerBucket::PerBucket()
    : ttft(kTtftBounds), itl(kItlBounds), tpot(kItlBounds), e2e(kE2eBounds), queue(kE2eBounds),
      prompt_tokens(kTokenBounds), generation_tokens(kTokenBounds) {}

void ServerMetrics::ObserveRequest(const RequestBucket& b, const engine::RequestMetrics& m,
                                   engine::FinishReason reason) {
  PerBucket& p = buckets_[b];
  const char* r = reason == engine::FinishReason::kCancelled ? "abort" : engine::FinishReasonName(reason);
  p.finished[r]++;
  p.e2e.Observe(m.e2e_s);
  p.queue.Observe(m.queue_s);
  p.prompt_tokens.Observe(m.prompt_tokens);
  p.generation_tokens.Observe(m.output_tokens);
  if (m.output_tokens > 0) p.ttft.Observe(m.ttft_s);
  for (double x : m.itl_s) p.itl.Observe(x);
  if (m.output_tokens > 1) p.tpot.Observe((m.e2e_s - m.ttft_s) / (m.output_tokens - 1));
}

void ServerMetrics::CountResponse(const std::string& route, int status) { responses_[{route, status}]++; }
void ServerMetrics::CountRejected(const std::string& reason) { rejected_[reason]++; }

std::string ServerMetrics::Render(const std::vector<ModelSnapshot>& models, int32_t admitted,
                                  int32_t queued, int64_t open_connections) const {
  std::string out;
  out.reserve(16384);
  auto per_model = [&](const char* name, const char* type, const char* help, auto value) {
    Header(&out, name, type, help);
    for (const ModelSnapshot& s : models)
      out += fmt::format("{}{{model_name=\"{}\"}} {}\n", name, Escape(s.model), Num(value(s)));
  };
  using S = const ModelSnapshot&;
  per_model("tarmac:num_requests_running", "gauge", "Requests in model execution batches (holding KV).",
            [](S s) { return double(s.stats.num_running); });
  per_model("tarmac:num_requests_waiting", "gauge", "Requests waiting: engine queue plus server admission queue.",
            [](S s) { return double(s.stats.num_waiting + s.server_queued); });
  per_model("tarmac:kv_cache_usage_perc", "gauge", "Fraction of KV blocks held by requests (1 = full).",
            [](S s) { return s.stats.kv_usage(); });
  per_model("tarmac:kv_cache_blocks_total", "gauge", "KV blocks in the pool.", [](S s) { return double(s.stats.kv.total_blocks); });
  per_model("tarmac:kv_cache_free_blocks", "gauge", "KV blocks free.", [](S s) { return double(s.stats.kv.free_blocks); });
  per_model("tarmac:kv_cache_request_blocks", "gauge", "KV blocks held by at least one request.",
            [](S s) { return double(s.stats.kv.request_blocks); });
  per_model("tarmac:kv_cache_cached_blocks", "gauge", "KV blocks held only by the prefix cache.",
            [](S s) { return double(s.stats.kv.cached_only_blocks); });
  per_model("tarmac:kv_cache_fragmentation", "gauge", "Unused fraction of token slots in blocks held by running requests.",
            [](S s) { return s.stats.kv.fragmentation(); });
  per_model("tarmac:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
            [](S s) { return double(s.stats.sched.prefix_queried_tokens); });
  per_model("tarmac:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
            [](S s) { return double(s.stats.sched.prefix_hit_tokens); });
  per_model("tarmac:prefix_cache_evicted_blocks_total", "counter", "Cached KV blocks evicted.",
            [](S s) { return double(s.stats.sched.evicted_blocks); });
  per_model("tarmac:num_preemptions_total", "counter", "Preemptions (recompute) of running requests.",
            [](S s) { return double(s.stats.sched.preemptions); });
  per_model("tarmac:prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
            [](S s) { return double(s.stats.prompt_tokens); });
  per_model("tarmac:generation_tokens_total", "counter", "Generated tokens.",
            [](S s) { return double(s.stats.generation_tokens); });
  per_model("tarmac:engine_steps_total", "counter", "Engine steps.", [](S s) { return double(s.stats.steps); });
  per_model("tarmac:spec_decode_draft_seconds_total", "counter", "Seconds spent drafting (speculative decoding).",
            [](S s) { return s.stats.draft_seconds; });
  per_model("tarmac:spec_decode_verify_seconds_total", "counter", "Seconds of target steps that verified drafts.",
            [](S s) { return s.stats.verify_seconds; });
  // Speculation per request bucket (task / temperature band / output band), named after vLLM's.
  auto per_spec_bucket = [&](const char* name, const char* type, const char* help, auto value) {
    Header(&out, name, type, help);
    for (const ModelSnapshot& s : models)
      for (const auto& [bucket, st] : s.stats.spec_buckets)
        out += fmt::format("{}{{model_name=\"{}\",spec_bucket=\"{}\"}} {}\n", name, Escape(s.model),
                           Escape(bucket), Num(value(st)));
  };
  using B = const speculative::BucketStats&;
  per_spec_bucket("tarmac:spec_decode_num_drafts_total", "counter", "Verify steps that checked at least one draft token.",
                  [](B b) { return double(b.drafts); });
  per_spec_bucket("tarmac:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.",
                  [](B b) { return double(b.draft_tokens); });
  per_spec_bucket("tarmac:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
                  [](B b) { return double(b.accepted_tokens); });
  per_spec_bucket("tarmac:spec_decode_acceptance_rate", "gauge", "Accepted / proposed draft tokens.",
                  [](B b) { return b.acceptance_rate(); });
  per_spec_bucket("tarmac:spec_decode_mean_accepted_length", "gauge", "Accepted draft tokens per verify step.",
                  [](B b) { return b.mean_accepted_length(); });
  per_spec_bucket("tarmac:spec_decode_decisions_total", "counter", "Policy decisions (requests considered for speculation).",
                  [](B b) { return double(b.decisions); });
  per_spec_bucket("tarmac:spec_decode_fallbacks_total", "counter", "Decisions that switched speculation off (k = 0).",
                  [](B b) { return double(b.fallbacks); });
  Header(&out, "tarmac:spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Draft tokens accepted at each draft position (0-based).");
  for (const ModelSnapshot& s : models)
    for (const auto& [bucket, st] : s.stats.spec_buckets)
      for (int i = 0; i < speculative::kMaxDraft && st.accepted_at[i] > 0; ++i)
        out += fmt::format("tarmac:spec_decode_num_accepted_tokens_per_pos_total{{model_name=\"{}\",spec_bucket=\"{}\",position=\"{}\"}} {}\n",
                           Escape(s.model), Escape(bucket), i, st.accepted_at[i]);

  struct H {
    const char* name;
    const char* help;
    const Histogram PerBucket::*h;
  };
  const H hs[] = {
      {"tarmac:time_to_first_token_seconds", "Time to first token (arrival at the engine to first token).", &PerBucket::ttft},
      {"tarmac:inter_token_latency_seconds", "Gaps between consecutive output tokens.", &PerBucket::itl},
      {"tarmac:time_per_output_token_seconds", "Mean time per output token after the first, per request.", &PerBucket::tpot},
      {"tarmac:e2e_request_latency_seconds", "End-to-end request latency in the engine.", &PerBucket::e2e},
      {"tarmac:request_queue_time_seconds", "Time from engine arrival to first scheduling.", &PerBucket::queue},
      {"tarmac:request_prompt_tokens", "Prompt tokens per request.", &PerBucket::prompt_tokens},
      {"tarmac:request_generation_tokens", "Generated tokens per request.", &PerBucket::generation_tokens},
  };
  for (const H& h : hs) {
    Header(&out, h.name, "histogram", h.help);
    for (const auto& [b, p] : buckets_) (p.*(h.h)).Render(h.name, Labels(b), &out);
  }
  Header(&out, "tarmac:request_success_total", "counter", "Finished requests by finished_reason (stop, length, abort, error).");
  for (const auto& [b, p] : buckets_)
    for (const auto& [r, n] : p.finished)
      out += fmt::format("tarmac:request_success_total{{{},finished_reason=\"{}\"}} {}\n", Labels(b), r, n);
  Header(&out, "tarmac:http_requests_total", "counter", "HTTP responses by route and status code.");
  for (const auto& [k, n] : responses_)
    out += fmt::format("tarmac:http_requests_total{{route=\"{}\",code=\"{}\"}} {}\n", k.first, k.second, n);
  Header(&out, "tarmac:requests_rejected_total", "counter", "Requests refused before reaching an engine, by reason.");
  for (const auto& [k, n] : rejected_) out += fmt::format("tarmac:requests_rejected_total{{reason=\"{}\"}} {}\n", k, n);
  Header(&out, "tarmac:server_requests_admitted", "gauge", "Generation requests admitted to the engines.");
  out += fmt::format("tarmac:server_requests_admitted {}\n", admitted);
  Header(&out, "tarmac:server_requests_queued", "gauge", "Generation requests in the server's admission queue.");
  out += fmt::format("tarmac:server_requests_queued {}\n", queued);
  Header(&out, "tarmac:http_open_connections", "gauge", "Open HTTP connections.");
  out += fmt::format("tarmac:http_open_connections {}\n", open_connections);
  return out;
}

}  // namespace tarmac::server
