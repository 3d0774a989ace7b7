// Plain data exchanged with the engine: its configuration, a request, the events a request's
// stream yields, per-request timings and engine-wide statistics.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"
#include "speculative/spec_policy.h"

namespace tarmac::engine {

// Speculative decoding: off, a draft model, n-gram prompt lookup, or auto (the draft model
// when one is given, else n-gram; the per-bucket policy picks k, including 0).
enum class SpecMode { kOff, kDraft, kNgram, kAuto };
const char* SpecModeName(SpecMode m);

struct EngineConfig {
  int32_t block_size = 16;           // tokens per KV block
  // KV memory: kv_blocks when > 0, else kv_memory_bytes when > 0, else enough for
  // max_running full contexts capped at half the machine's available memory.
  int32_t kv_blocks = 0;
  int64_t kv_memory_bytes = 0;
  model::KvDtype kv_dtype = model::KvDtype::kF16;
  int32_t max_batched_tokens = 512;  // tokens per step
  int32_t max_running = 64;          // requests holding KV at once
  int32_t max_context = 0;           // 0: the model's training context
  bool prefix_cache = true;
  int32_t threads = 1;               // compute threads of this engine's pool
  SpecMode spec = SpecMode::kOff;
  model::LlamaModel* draft_model = nullptr;  // borrowed; needed for kDraft
  int32_t spec_k = 4;                // draft length (kDraft/kNgram), max k for the policy (kAuto)
  bool spec_policy = false;          // choose k per bucket (always on in kAuto)
  // The policy's limit on how much a bucket's speculation may lengthen the step of the
  // batch's other requests (SpecPolicyConfig::max_other_slowdown); negative: none.
  double spec_max_slowdown = 0.05;
  // EngineClient::Create runs LlamaModel::Warmup on the engine's thread before it returns,
  // so the first request does not pay for first use (a 1B Q8_0 model's first completion took
  // 334-356 ms against 265-275 after). Not counted anywhere: no request, step or cache entry.
  bool warmup = true;
};

struct EngineRequest {
  std::vector<int32_t> prompt;         // token ids
  sampling::SamplingParams sampling;
  int32_t max_tokens = 16;             // >= 1
  bool ignore_eos = false;             // keep going past end-of-generation tokens
  std::vector<int32_t> stop_token_ids; // extra tokens that end the request
  std::vector<std::string> stop;       // stop strings (not included in the text)
  uint64_t ns = 0;                     // prefix-cache namespace (tenant salt + model)
  int32_t priority = 0;                // smaller is more important
  bool speculative = true;             // false: never speculate for this request
  std::string task;                    // request bucket's task type (route or client given)
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason r);  // "stop", "length", "cancelled", "error"

struct RequestMetrics {
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
  int32_t preemptions = 0;
  double queue_s = 0;                // submit -> first scheduled
  double ttft_s = 0;                 // submit -> first token
  double e2e_s = 0;                  // submit -> finished
  std::vector<double> itl_s;         // gaps between consecutive tokens
};

// One step of a request's stream. A token event carries the sampled token and the text it
// completed (possibly empty: a partial UTF-8 character or a possible stop string is held
// back). The last event has finish != kNone, the request's metrics, and may carry a token too.
struct TokenEvent {
  int32_t token = -1;  // -1: no token in this event
  std::string text;
  float logprob = 0.0f;
  std::vector<sampling::TokenLogprob> top;
  FinishReason finish = FinishReason::kNone;
  Status error;        // set when finish == kError
  RequestMetrics metrics;
  bool last() const { return finish != FinishReason::kNone; }
};

struct StepStats {
  int32_t batch_size = 0;      // requests in the step
  int32_t prefill_tokens = 0;
  int32_t decode_tokens = 0;
  double seconds = 0;          // forward + sampling
};

struct EngineStats {
  int64_t steps = 0;
  int64_t requests_finished = 0;
  int64_t requests_cancelled = 0;
  int64_t prompt_tokens = 0;      // of finished requests
  int64_t generation_tokens = 0;  // every sampled token
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t max_concurrent_running = 0;
  sched::KvUsage kv;
  sched::SchedulerCounters sched;
  StepStats last_step;
  // Speculation, per request bucket ("task/T<band>/out<band>"), and time spent.
  std::map<std::string, speculative::BucketStats> spec_buckets;
  double draft_seconds = 0;
  double verify_seconds = 0;   // target steps that verified drafts
  double kv_usage() const {  // fraction of blocks in use by requests
    return kv.total_blocks == 0 ? 0.0 : static_cast<double>(kv.request_blocks) / kv.total_blocks;
  }
};

}  // namespace tarmac::engine
