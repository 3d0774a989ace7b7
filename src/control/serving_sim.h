// SimulateServing: a queueing simulation of one engine over a measured StepCostCurve, for the
// planner's predictions (throughput, TTFT, TPOT, SLO attainment, replicas). It schedules the
// way sched::Scheduler does, without KV limits: each step decodes every running request whose
// prompt is done (one token each), then continues running prefills, then admits waiting
// requests first come first served while the running cap allows, all under the step's token
// budget; a step costs curve.Seconds(tokens in it). A request's first token comes at the end
// of the step that computes its last prompt token, the others one per decode step.
//
// Arrivals are open loop (given times) or closed loop (`concurrency` clients, each sending
// its next request when the previous one ends, as `bench offline` does).
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "control/step_cost.h"

namespace tarmac::control {

struct SimRequest {
  double arrival_s = 0;       // open loop only
  int32_t prompt_tokens = 1;  // >= 1
  int32_t output_tokens = 1;  // >= 1
  int32_t cls = 0;            // the workload class it came from
};

struct SimConfig {
  int32_t max_batched_tokens = 512;
  int32_t max_running = 64;
  int32_t concurrency = 0;  // > 0: closed loop with this many clients (arrival_s ignored)
};

struct SimOutcome {
  double arrival_s = 0, queue_s = 0, ttft_s = 0, tpot_s = 0, e2e_s = 0;
  int32_t cls = 0, output_tokens = 0;
};

struct SimResult {
  std::vector<SimOutcome> requests;  // in input order
  double makespan_s = 0;             // first arrival to last finish
  int64_t steps = 0, output_tokens = 0;
  double output_tokens_per_s() const { return makespan_s > 0 ? output_tokens / makespan_s : 0; }
  double requests_per_s() const { return makespan_s > 0 ? requests.size() / makespan_s : 0; }
};

// Preconditions: !curve.empty(); config fields >= 1 (concurrency >= 0); request lengths >= 1.
SimResult SimulateServing(const std::vector<SimRequest>& requests, const StepCostCurve& curve, const SimConfig& config);

}  // namespace tarmac::control
