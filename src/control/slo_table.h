// The SLO report as a terminal table: `tarmac report`, and the per-bucket tables that `bench
// offline` and `bench serve` print for their run. Reads the report's JSON (slo_report.h's
// ToJson schema, which is also what GET /v1/slo answers), so a report fetched over HTTP and
// one built in process print the same. Per model: a header (KV, prefix cache, speculation
// times, controller state and measures, latest actions), then one row per bucket for the
// window, one per bucket since start, or both.
//
// Pure function of its input; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tarmac::control {

enum class SloSpans { kWindow, kSinceStart, kBoth };

// Missing fields print as "-"; fails never (a malformed document prints what it can).
std::string RenderSloTable(const nlohmann::json& report, SloSpans spans = SloSpans::kBoth);

}  // namespace tarmac::control
