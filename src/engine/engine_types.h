// Plain data exchanged with the engine: a request, the events a request's stream yields,
// per-request timings, the runtime knobs and engine-wide statistics. (The configuration an
// engine is built with is in engine_config.h.)
//
// Plain values, safe to copy; no model or kernel headers (callers such as the server include
// this without the model's).
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/compiled_grammar.h"
#include "metrics/request_bucket.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"

namespace tarmac::engine {

// Test aid: where the engine makes one request's processing fail, to show that a fault in one
// request fails that request only (or, kEngine, that a dead step loop marks the engine
// unhealthy). Only an engine built with EngineConfig::fault_injection accepts a request that
// asks for one (Validate refuses it otherwise), and only the server's --debug-fault-injection
// turns that on.
enum class InjectedFault {
  kNone,
  kTokenize,    // encoding the prompt throws (router::Prepare, before the engine)
  kDetokenize,  // detokenizing its first sampled token throws (step thread)
  kKernel,      // every forward pass that contains it throws (step thread)
  kKvAlloc,     // allocating its KV blocks throws std::bad_alloc (the scheduler)
  kCheck,       // an invariant check fails while sampling for it (step thread)
  kEngine,      // the step throws outside any request's processing: the step loop dies
};
const char* InjectedFaultName(InjectedFault f);  // "tokenize", "detokenize", ... ("" for kNone)
// Errors name the known faults.
Result<InjectedFault> ParseInjectedFault(std::string_view name);

struct EngineRequest {
  std::vector<int32_t> prompt;         // token ids
  sampling::SamplingParams sampling;
  int32_t max_tokens = 16;             // >= 1
  bool ignore_eos = false;             // keep going past end-of-generation tokens
  std::vector<int32_t> stop_token_ids; // extra tokens that end the request
  std::vector<std::string> stop;       // stop strings (not included in the text)
  uint64_t ns = 0;                     // prefix-cache namespace (tenant salt + model)
  prefix::SessionRetain session;       // id 0: none; else its prefix stays cached for the session
  int32_t priority = 0;                // smaller is more important
  bool speculative = true;             // false: never speculate for this request
  // Constrained decoding: every output token is one the grammar allows, and the request
  // finishes (kStop) when the grammar is complete; an end-of-generation token the grammar
  // accepts ends it even with ignore_eos. Compiled for this engine's vocabulary
  // (EngineCore::grammars()); shared by the choices that use it. Null: unconstrained.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // >= 0: report the prompt tokens' logprobs with that many alternatives (0..20); the prompt
  // is then computed in full (no prefix-cache reuse). -1: off.
  int32_t prompt_logprobs = -1;
  // The request bucket's features besides lengths and temperature ("" = the default).
  std::string task;
  std::string sla;
  metrics::Risk risk = metrics::Risk::kLow;
  // The request's bucket in the engine's registry; kNoBucket: Validate computes it from the
  // fields above (metrics::RequestFeatures), once.
  metrics::BucketId bucket = metrics::kNoBucket;
  InjectedFault fault = InjectedFault::kNone;  // test aid (see InjectedFault)
};

// The request bucket's features of a request (the one place they are read from a request).
metrics::RequestFeatures BucketFeatures(const EngineRequest& r);

class EngineCore;

// A request that passed one engine's checks, with its bucket set. Only EngineCore::Validate
// makes one; it may be submitted to that engine only (asserted).
class ValidRequest {
 public:
  const EngineRequest& request() const { return r_; }

 private:
  friend class EngineCore;
  ValidRequest(EngineRequest r, const EngineCore* engine) : r_(std::move(r)), engine_(engine) {}
  EngineRequest r_;
  const EngineCore* engine_;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
// The one table of finish-reason names, as the APIs and the metrics' labels say them (vLLM's:
// a cancelled request finished with "abort"): "stop", "length", "abort", "error"; kNone: "".
inline constexpr int kFinishReasons = 4;  // the named ones, kStop..kError
const char* FinishReasonName(FinishReason r);
// 0..kFinishReasons-1 for kStop..kError (kNone counts as an error); a metric's slot per reason.
int FinishReasonIndex(FinishReason r);

struct RequestMetrics {
  metrics::BucketId bucket = metrics::kNoBucket;
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
  // The request's first event when it asked for prompt_logprobs: entry i is prompt token
  // i + 1 given the tokens before it (the first prompt token has none).
  std::vector<sampling::SampleResult> prompt_logprobs;
  FinishReason finish = FinishReason::kNone;
  Status error;        // set when finish == kError
  RequestMetrics metrics;
  bool last() const { return finish != FinishReason::kNone; }
};

// Settings that may change while the engine runs (EngineClient::SetKnobs), applied at the next
// step boundary. Defaults: what the engine's config says (KnobsFrom).
struct EngineKnobs {
  int32_t max_batched_tokens = 512;   // tokens per step
  int32_t max_running = 64;           // requests holding KV (lowering it preempts nobody)
  bool speculation = true;            // false: no drafting at all (the proposer stays loaded)
  int32_t spec_max_k = 4;             // every bucket's k at most this (<= the configured k)
  std::map<metrics::BucketId, int32_t> bucket_max_k;  // tighter caps for some buckets
  int32_t max_waiting = 0;            // requests queued in the engine at most; 0: no limit
  int32_t admit_max_priority = INT32_MAX;  // waiting requests of a larger class are not admitted
  // KV relief, enforced at every step boundary while set: cached-only prefix blocks beyond this
  // many are evicted (LRU), and running requests of a priority class larger than
  // preempt_above_priority are preempted (recompute). INT32_MAX: off. preempt_above_priority
  // must be >= admit_max_priority, or the preempted requests would be admitted again at once.
  int32_t max_cached_blocks = INT32_MAX;
  int32_t preempt_above_priority = INT32_MAX;
  bool operator==(const EngineKnobs&) const = default;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t requests_finished = 0;   // ended by stop or length
  int64_t requests_cancelled = 0;  // cancelled or failed
  int64_t prompt_tokens = 0;       // of finished requests
  int64_t generation_tokens = 0;   // every sampled token
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t max_concurrent_running = 0;
  sched::KvUsage kv;
  sched::SchedulerCounters sched;
  double draft_seconds = 0;
  double verify_seconds = 0;       // target steps that verified drafts
  int64_t events_dropped = 0;      // cache events lost to a full event queue
  double kv_usage() const {  // fraction of blocks in use by requests
    return kv.total_blocks == 0 ? 0.0 : static_cast<double>(kv.request_blocks) / kv.total_blocks;
  }
};

// Speculation counts of one bucket (or summed over buckets).
struct SpecCounts {
  int64_t decisions = 0;      // requests the policy considered
  int64_t fallbacks = 0;      // of those, speculation off (k = 0)
  int64_t drafts = 0;         // verify steps with at least one draft
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  std::vector<int64_t> accepted_at;  // accepted at draft position i (0-based)
  double acceptance_rate() const {
    return draft_tokens ? static_cast<double>(accepted_tokens) / draft_tokens : 0.0;
  }
  double mean_accepted_length() const {
    return drafts ? static_cast<double>(accepted_tokens) / drafts : 0.0;
  }
  void Add(const SpecCounts& o);
};

}  // namespace tarmac::engine
