// The SLO and controller flags of `tarmac serve` (and the --slo of the benchmarks), registered
// by one helper so the names, ranges and defaults (control::ControllerConfig's) are the same
// wherever they appear:
//   --slo TIER=TTFT_MS:TPOT_MS (repeatable; the order ranks the tiers, first = top)
//   --controller on|off, --controller-interval S, --controller-window S,
//   --controller-min-samples N, --kv-high-watermark F, --kv-low-watermark F,
//   --spec-off-acceptance F, --spec-reprobe S, --controller-max-tokens N
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "control/degradation.h"
#include "control/slo_targets.h"

namespace tarmac::apps {

struct ControlFlags {
  std::vector<std::string> slo;
  std::string controller = "off";
  control::ControllerConfig config;
};

// Only --slo.
void AddSloFlag(CLI::App* cmd, ControlFlags* f);
// --slo and every controller flag.
void AddControlFlags(CLI::App* cmd, ControlFlags* f);

// The tiers of --slo; errors name the bad value.
Result<control::SloTargets> SloTargetsFrom(const ControlFlags& f);

}  // namespace tarmac::apps
