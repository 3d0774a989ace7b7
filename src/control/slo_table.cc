#include "control/slo_table.h"

#include <fmt/format.h>

namespace tarmac::control {
namespace {

using Json = nlohmann::json;

const Json& At(const Json& j, const char* key) {
  static const Json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

std::string Str(const Json& j) { return j.is_string() ? j.get<std::string>() : "-"; }

std::string Num(const Json& j, const char* fmtspec = "{:.1f}") {
  return j.is_number() ? fmt::format(fmt::runtime(fmtspec), j.get<double>()) : "-";
}

std::string Pct(const Json& j) { return j.is_number() ? fmt::format("{:.1f}%", 100 * j.get<double>()) : "-"; }

// "p50/p95/p99" of a quantiles object.
std::string Q(const Json& q) {
  return Num(At(q, "p50")) + "/" + Num(At(q, "p95")) + "/" + Num(At(q, "p99"));
}

std::string Label(const Json& b, const char* key) { return Str(At(At(b, "labels"), key)); }

void Header(std::string* out) {
  *out += fmt::format("  {:<12} {:<10} {:<9} {:<9} {:<4} {:<6} {:>6} {:>20} {:>20} {:>8} {:>8} {:>8} {:>7} {:>13} {:>6}\n",
                      "task", "sla", "prompt", "output", "T", "prio", "reqs", "TTFT p50/95/99 ms", "TPOT p50/95/99 ms",
                      "e2e p99", "queue99", "tok/s", "SLO", "spec acc/rej", "fb");
}

void Row(const Json& b, const Json& span, std::string* out) {
  const Json& spec = At(b, "speculation");
  const std::string acc = At(spec, "draft_tokens").is_number() && At(spec, "draft_tokens").get<double>() > 0
                              ? Num(At(spec, "accepted_tokens"), "{:.0f}") + "/" + Num(At(spec, "rejected_tokens"), "{:.0f}")
                              : "-";
  *out += fmt::format("  {:<12} {:<10} {:<9} {:<9} {:<4} {:<6} {:>6} {:>20} {:>20} {:>8} {:>8} {:>8} {:>7} {:>13} {:>6}\n",
                      Label(b, "task"), Label(b, "sla"), Label(b, "prompt_band"), Label(b, "output_band"),
                      Label(b, "temperature_band"), Label(b, "priority_class"), Num(At(span, "requests"), "{:.0f}"),
                      Q(At(span, "ttft_ms")), Q(At(span, "tpot_ms")), Num(At(At(span, "e2e_ms"), "p99")),
                      Num(At(At(span, "queue_ms"), "p99")), Num(At(span, "output_tokens_per_s")),
                      Pct(At(span, "slo_attainment")), acc, Pct(At(spec, "fallback_rate")));
}

void Controller(const Json& c, std::string* out) {
  if (!c.is_object()) {
    *out += "  controller: off\n";
    return;
  }
  std::string measures;
  for (const auto& [m, reason] : At(c, "measures").items()) measures += fmt::format(" {}({})", m, Str(reason));
  for (const Json& cap : At(c, "k_caps"))
    measures += fmt::format(" k<={} for [{}]({})", Num(At(cap, "k"), "{:.0f}"), Str(At(cap, "bucket")), Str(At(cap, "reason")));
  *out += fmt::format("  controller: {} for {} s;{}\n", Str(At(c, "state")), Num(At(c, "state_for_s"), "{:.0f}"),
                      measures.empty() ? " no measures" : measures);
  const Json& recent = At(c, "recent_actions");
  if (!recent.is_array()) return;
  const size_t from = recent.size() > 8 ? recent.size() - 8 : 0;
  for (size_t i = from; i < recent.size(); ++i) {
    const Json& a = recent[i];
    const std::string detail = Str(At(a, "detail"));
    *out += fmt::format("    {:>7} s ago  {} ({}){}\n", Num(At(a, "ago_s")), Str(At(a, "action")), Str(At(a, "reason")),
                        detail == "-" || detail.empty() ? "" : ": " + detail);
  }
}

// KV, cache and speculation state of a server's model; a client's report has its name only.
void ModelHeader(const Json& m, std::string* out) {
  if (!At(m, "kv_cache_usage").is_number()) {
    *out += fmt::format("\nmodel {}:\n", Str(At(m, "model")));
    return;
  }
  const Json& pc = At(m, "prefix_cache");
  const Json& sp = At(m, "speculation");
  *out += fmt::format("\nmodel {}: KV {} used, {} running, {} waiting, {} preemptions; prefix cache {} of {} prompt "
                      "tokens; speculation acceptance {}, draft {} s, verify {} s\n",
                      Str(At(m, "model")), Pct(At(m, "kv_cache_usage")), Num(At(m, "requests_running"), "{:.0f}"),
                      Num(At(m, "requests_waiting"), "{:.0f}"), Num(At(m, "preemptions"), "{:.0f}"),
                      Num(At(pc, "hit_tokens"), "{:.0f}"), Num(At(pc, "queried_tokens"), "{:.0f}"),
                      Pct(At(sp, "acceptance_rate")), Num(At(sp, "draft_seconds"), "{:.2f}"),
                      Num(At(sp, "verify_seconds"), "{:.2f}"));
}

// The tiers' p99s over the control window against their targets (what the controller judges).
void ControlWindowTiers(const Json& m, double window_s, std::string* out) {
  const Json& tiers = At(m, "control_window_tiers");
  if (!tiers.is_array() || tiers.empty()) return;
  *out += fmt::format("  tiers over the last {} s (p99 / target, requests):", Num(Json(window_s), "{:g}"));
  for (const Json& t : tiers)
    *out += fmt::format(" {} TTFT {}/{} ms TPOT {}/{} ms ({});", Str(At(t, "tier")), Num(At(t, "p99_ttft_ms"), "{:.1f}"),
                        Num(At(t, "ttft_target_ms"), "{:g}"), Num(At(t, "p99_tpot_ms"), "{:.2f}"),
                        Num(At(t, "tpot_target_ms"), "{:g}"), Num(At(t, "samples"), "{:.0f}"));
  out->back() = '\n';
}

// One line per route and per bucket of it: requests, escalation and fallback rates, models.
void Routes(const Json& routes, std::string* out) {
  auto line = [](const Json& r) {
    std::string models;
    for (const auto& [m, share] : At(r, "model_share").items()) models += fmt::format(" {} {}", m, Pct(share));
    return fmt::format("{} requests, escalated {}, fallback {}, answered by:{}", Num(At(r, "requests"), "{:.0f}"),
                       Pct(At(r, "escalation_rate")), Pct(At(r, "fallback_rate")), models.empty() ? " -" : models);
  };
  if (!routes.is_array()) return;
  for (const Json& r : routes) {
    *out += fmt::format("\nroute {} (since start): {}\n", Str(At(r, "route")), line(r));
    for (const Json& b : At(r, "buckets")) *out += fmt::format("  [{}] {}\n", Str(At(b, "key")), line(b));
  }
}

}  // namespace

std::string RenderSloTable(const nlohmann::json& report, SloSpans spans) {
  std::string out;
  std::string tiers;
  for (const Json& t : At(report, "tiers"))
    tiers += fmt::format(" {}={}:{} ms", Str(At(t, "name")), Num(At(t, "ttft_ms"), "{:g}"), Num(At(t, "tpot_ms"), "{:g}"));
  out += fmt::format("SLO targets (p99 TTFT:TPOT):{}\n", tiers.empty() ? " none" : tiers);
  for (const Json& m : At(report, "models")) {
    ModelHeader(m, &out);
    const Json& cw = At(report, "control_window_s");
    ControlWindowTiers(m, cw.is_number() ? cw.get<double>() : 0, &out);
    if (At(m, "controller").is_object() || At(At(report, "controller"), "enabled").is_boolean()) Controller(At(m, "controller"), &out);
    if (spans != SloSpans::kSinceStart) {
      out += fmt::format("  last {} s:\n", Num(At(report, "window_s"), "{:.0f}"));
      Header(&out);
      for (const Json& b : At(m, "buckets")) Row(b, At(b, "window"), &out);
    }
    if (spans == SloSpans::kWindow) continue;
    out += fmt::format("  since start ({} s):\n", Num(At(report, "uptime_s"), "{:.1f}"));
    Header(&out);
    for (const Json& b : At(m, "buckets")) Row(b, At(b, "total"), &out);
  }
  Routes(At(report, "routes"), &out);
  return out;
}

}  // namespace tarmac::control
