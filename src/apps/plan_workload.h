// The workload file of `tarmac plan --workload W.yaml`:
//
//   rate: 4            # requests/s, Poisson (open loop); or
//   concurrency: 16    # clients, closed loop (when no rate)
//   requests: 200      # simulated requests
//   target_rate: 50    # requests/s the deployment must serve (replicas needed)
//   seed: 1
//   classes:           # the length mix
//     - name: qa
//       share: 0.7     # relative frequency
//       prompt_tokens: 128
//       output_tokens: 64
//       tier: premium  # SLA tier (its --slo targets judge it)
//       acceptance: 0.7          # stated per-position draft acceptance (speculation)
//       shared_prefix_tokens: 0  # tokens every request of the class shares (prefix cache)
//
// Every key is optional except a class's lengths; an unknown key, a wrong type or a value out
// of range is an error naming its path ("classes[1].share"), never ignored.
//
// Functions; thread-safe.
#pragma once

#include <string>

#include "base/status.h"
#include "control/capacity_plan.h"

namespace tarmac::apps {

Result<control::PlanWorkload> LoadPlanWorkload(const std::string& path);
// The same from YAML text (tests); `source` names it in errors.
Result<control::PlanWorkload> ParsePlanWorkload(const std::string& yaml, const std::string& source);

}  // namespace tarmac::apps
