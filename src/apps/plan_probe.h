// `tarmac plan --measure`: probes this machine for the planner. Memory bandwidth: threads
// summing (the SIMD kernels' loads) a buffer the size of the model's weights (so the bytes come from the
// same level of the memory hierarchy a decode step reads them from). Step costs: through a
// real engine (EngineClient, speculation off, the run's threads and KV dtype), decode steps of
// B requests at the workload's mean context (the prompt is cached once, then B requests share
// it and decode in lockstep: the median gap between their tokens, the first gap left out, is
// the B-token step) and prefill steps of one
// request (its TTFT). The sizes are measured in interleaved rounds and each size's median
// kept, so a moment of interference from other processes moves one sample, not the curve.
// Starts another round only while one more fits its time budget (the first always runs).
//
// Functions; run on one thread (each probe owns its engine).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "control/step_cost.h"
#include "engine/engine_config.h"
#include "model/llama_model.h"
#include "tensor/aligned_buffer.h"
#include "tokenizer/tokenizer.h"

namespace tarmac::apps {

// A buffer of `bytes` (>= 1 MiB) from huge pages, faulted in once, that Measure reads on a
// pool's threads (each its own part, as the decode kernels stream the weights). Owns the
// buffer; Measure mutates only the scratch sums. Not thread-safe.
class ReadBandwidthProbe {
 public:
  explicit ReadBandwidthProbe(int64_t bytes);
  // Bytes per second; best of `passes` (>= 1) passes over the buffer.
  double Measure(ThreadPool* pool, int passes = 5);

 private:
  AlignedBuffer buf_;
  int64_t n_ = 0;  // floats, whole cache lines
};

// ReadBandwidthProbe(bytes).Measure(pool).
double MeasureReadBandwidth(int64_t bytes, ThreadPool* pool);

struct StepProbe {
  int32_t context = 192;                   // KV tokens each decode step attends to
  std::vector<int32_t> batches = {1, 2, 4, 8, 16};
  std::vector<int32_t> prefills = {128, 512};
  int32_t decode_tokens = 24;              // tokens per request in a decode probe
  int32_t rounds = 3;                      // interleaved rounds over all sizes
  double budget_s = 25;
};

struct StepProbeResult {
  control::StepCostCurve curve;
  std::vector<std::pair<int32_t, double>> decode, prefill;  // (size, median seconds)
  int32_t rounds = 0;      // rounds completed
  double seconds = 0;
  bool truncated = false;  // fewer rounds than asked: the budget ran out
};

// `config` is the engine's (threads, KV dtype, max_batched_tokens; the probe sets running cap,
// KV blocks, speculation off). Errors: the engine could not be built, a request failed.
Result<StepProbeResult> MeasureStepCosts(model::LlamaModel* model, const tok::Tokenizer* tokenizer,
                                         engine::EngineConfig config, const StepProbe& probe);

}  // namespace tarmac::apps
