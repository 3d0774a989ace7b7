// EngineConfig: everything an engine is built with, declared once: the scheduler's settings,
// the KV cache's, speculation's, threads, metrics. The defaults written here (and in
// sched::SchedulerConfig, speculative::SpecPolicyConfig, which it nests) are the defaults of
// every subcommand; ResolveEngineConfig checks a config against a model and fills the
// derived fields, with errors that name the field.
//
// Plain values (and the on_events callback); the borrowed pointers (draft model) and the shared registry must outlive the
// engine. Thread-safe to copy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/engine_types.h"
#include "metrics/registry.h"
#include "model/kv_dtype.h"
#include "sched/scheduler.h"
#include "speculative/spec_policy.h"

namespace tarmac::model {
class LlamaModel;
struct ModelConfig;
}  // namespace tarmac::model

namespace tarmac::engine {

// Speculative decoding: off, a draft model, n-gram prompt lookup, or auto (the draft model
// when one is given, else n-gram; the per-bucket policy picks k, including 0).
enum class SpecMode { kOff, kDraft, kNgram, kAuto };
const char* SpecModeName(SpecMode m);           // "off", "draft", "ngram", "auto"
Result<SpecMode> ParseSpecMode(std::string_view s);

struct KvConfig {
  // Memory: `blocks` when > 0, else `memory_bytes` when > 0, else enough for max_running full
  // contexts, capped at half the machine's available memory.
  int32_t blocks = 0;
  int64_t memory_bytes = 0;
  model::KvDtype dtype = model::KvDtype::kF16;
  bool prefix_cache = true;
};

struct SpeculationConfig {
  SpecMode mode = SpecMode::kOff;
  model::LlamaModel* draft_model = nullptr;  // borrowed; needed for kDraft
  bool policy = false;                       // choose k per bucket (always on in kAuto)
  // policy.max_k is the draft length: the fixed k without the policy, the largest with it;
  // likewise policy.max_width / max_branch for token trees (a draft model's only; models
  // with sliding windows draft chains).
  speculative::SpecPolicyConfig policy_config;
};

struct EngineConfig {
  sched::SchedulerConfig sched;  // max_context 0: the model's training context
  KvConfig kv;
  SpeculationConfig spec;
  int32_t threads = 1;  // compute threads of this engine's pool
  // CPUs its threads run on, one each (the step thread on cpus[0], pool worker t on cpus[t])
  // when there are at least as many as threads, else all of them shared (ThreadCpus in
  // base/cpu_affinity.h); empty: wherever the OS puts them.
  std::vector<int> cpus;
  // EngineClient::Create runs the model's throwaway warm-up passes on the engine's thread before
  // it returns, so the first request does not pay for first use; counted nowhere.
  bool warmup = true;
  std::string model_name = "model";           // the model_name label of the engine's series
  std::shared_ptr<metrics::Registry> metrics;  // null: the engine makes a private one
  // Prefix-cache events (stored / removed blocks) kept for EngineClient::DrainEvents; beyond
  // this many undrained events new ones are dropped and counted. 0: not recorded at all.
  int32_t event_capacity = 0;
  // Called on the step thread when a request ends (any reason), after its metrics are
  // recorded, with its timings and the step's clock (NowSeconds). Must be cheap and
  // thread-safe (the control module's SLO tracker). Empty: nothing is called.
  std::function<void(const RequestMetrics&, FinishReason, double now_s)> on_request_finished;
  // Called on the step thread after events were queued (a publisher's wake-up): must be cheap,
  // never block, and stay callable while the engine lives. Empty: nobody is told.
  std::function<void()> on_events;
  // Test aid: requests may carry an InjectedFault (Validate refuses them when off). Only tests
  // and `tarmac serve --debug-fault-injection` turn it on.
  bool fault_injection = false;
};

// Checks the fields (ranges, a draft model for kDraft, the context against the model's) and
// fills derived ones: sched.max_context, spec.policy in kAuto, a registry. KV sizing happens
// when the engine is built (it needs the model's KV shape).
Result<EngineConfig> ResolveEngineConfig(const model::ModelConfig& model, EngineConfig c);

}  // namespace tarmac::engine
