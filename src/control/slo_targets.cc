#include "control/slo_targets.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace tarmac::control {
namespace {

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

Result<double> ParseMs(std::string_view spec, std::string_view what, std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    return InvalidField("--slo", "--slo '{}': {} '{}' is not a number of milliseconds", spec, what, s);
  if (!std::isfinite(v) || v <= 0)
    return InvalidField("--slo", "--slo '{}': {} must be > 0 ms, got {}", spec, what, s);
  return v;
}

}  // namespace

Result<TierSlo> ParseTierSlo(std::string_view spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos)
    return InvalidField("--slo", "--slo '{}': expected TIER=TTFT_MS:TPOT_MS (e.g. premium=200:50)", spec);
  const std::string_view name = spec.substr(0, eq), rest = spec.substr(eq + 1);
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos)
    return InvalidField("--slo", "--slo '{}': expected TTFT_MS:TPOT_MS after '=', got '{}'", spec, rest);
  TierSlo t;
  t.name = std::string(name);
  TARMAC_ASSIGN_OR_RETURN(t.ttft_ms, ParseMs(spec, "the TTFT target", rest.substr(0, colon)));
  TARMAC_ASSIGN_OR_RETURN(t.tpot_ms, ParseMs(spec, "the TPOT target", rest.substr(colon + 1)));
  if (!ValidName(t.name))
    return InvalidField("--slo", "--slo '{}': tier '{}' must be 1-64 letters, digits, '-' or '_'", spec, t.name);
  return t;
}

Status SloTargets::Add(TierSlo t) {
  if (!ValidName(t.name))
    return InvalidField("slo", "SLO tier '{}' must be 1-64 letters, digits, '-' or '_'", t.name);
  if (!std::isfinite(t.ttft_ms) || t.ttft_ms <= 0)
    return InvalidField("slo", "SLO tier '{}': the TTFT target must be > 0 ms, got {}", t.name, t.ttft_ms);
  if (!std::isfinite(t.tpot_ms) || t.tpot_ms <= 0)
    return InvalidField("slo", "SLO tier '{}': the TPOT target must be > 0 ms, got {}", t.name, t.tpot_ms);
  if (Find(t.name) != nullptr) return InvalidField("slo", "SLO tier '{}' is listed twice", t.name);
  tiers_.push_back(std::move(t));
  return Status::Ok();
}

Result<SloTargets> SloTargets::FromFlags(const std::vector<std::string>& specs) {
  SloTargets out;
  for (const std::string& s : specs) {
    TARMAC_ASSIGN_OR_RETURN(TierSlo t, ParseTierSlo(s));
    if (Status st = out.Add(std::move(t)); !st.ok())
      return InvalidField("--slo", "--slo '{}': {}", s, st.message());
  }
  return out;
}

const TierSlo* SloTargets::Find(std::string_view tier) const {
  for (const TierSlo& t : tiers_)
    if (t.name == tier) return &t;
  return nullptr;
}

int32_t SloTargets::Rank(std::string_view tier) const {
  for (size_t i = 0; i < tiers_.size(); ++i)
    if (tiers_[i].name == tier) return static_cast<int32_t>(i);
  return size();
}

int32_t SloTargets::LowestRank() const { return std::max<int32_t>(1, size() - 1); }

}  // namespace tarmac::control
