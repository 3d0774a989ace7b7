#include "apps/control_flags.h"

namespace tarmac::apps {

void AddSloFlag(CLI::App* cmd, ControlFlags* f) {
  cmd->add_option("--slo", f->slo,
                  "SLO of an SLA tier: TIER=TTFT_MS:TPOT_MS (p99 targets; repeatable, most important tier "
                  "first; unlisted tiers rank last)");
}

void AddControlFlags(CLI::App* cmd, ControlFlags* f) {
  AddSloFlag(cmd, f);
  control::ControllerConfig& c = f->config;
  cmd->add_option("--controller", f->controller,
                  "degradation controller: on|off (off: behaviour exactly as without one)")
      ->capture_default_str()->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--controller-interval", c.interval_s, "seconds between controller ticks")
      ->capture_default_str()->check(CLI::Range(0.01, 3600.0));
  cmd->add_option("--controller-window", c.window_s, "seconds of the control window (tier p99s, draft acceptance)")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--controller-min-samples", c.min_samples, "requests of a tier in the window before its p99 counts")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--kv-high-watermark", c.kv_high, "KV usage (fraction of blocks held by requests) that is pressure")
      ->capture_default_str()->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--kv-low-watermark", c.kv_low, "KV usage below which KV pressure is over")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--spec-off-acceptance", c.spec_off_acceptance,
                  "a bucket's draft acceptance over the window below this: no drafts for it")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--spec-reprobe", c.spec_reprobe_s, "seconds before a bucket's draft cap is lifted to measure it again")
      ->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--controller-max-tokens", c.max_tokens_cap, "max_tokens of the lowest tiers while degraded")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
}

Result<control::SloTargets> SloTargetsFrom(const ControlFlags& f) { return control::SloTargets::FromFlags(f.slo); }

}  // namespace tarmac::apps
