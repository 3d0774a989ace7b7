// SloTargets: the latency objectives of each SLA tier (a request's `sla`): p99 TTFT and p99
// TPOT in milliseconds, ranked by importance in the order they were given (rank 0 is the top
// tier). A tier that is not listed has no targets and ranks below every listed one.
//
// The "lowest" tiers are those the controller degrades first (max_tokens cap, shedding, a
// smaller model): the last listed tier when two or more are listed, and every unlisted tier.
// The top tier is never among them.
//
// Filled from `tarmac serve --slo TIER=TTFT_MS:TPOT_MS` (repeatable) today, from the
// router's YAML config later. Plain values; thread-safe to read once built.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tarmac::control {

struct TierSlo {
  std::string name;    // letters, digits, '-' and '_' (as a request's `sla`)
  double ttft_ms = 0;  // p99 time to first token, > 0
  double tpot_ms = 0;  // p99 time per output token after the first, > 0
};

// "TIER=TTFT_MS:TPOT_MS", e.g. "premium=200:50". Errors name the flag and the bad part.
Result<TierSlo> ParseTierSlo(std::string_view spec);

class SloTargets {
 public:
  // Appends a tier (the next rank). Errors: a bad name, a target not > 0 or not finite, a
  // tier listed twice.
  Status Add(TierSlo tier);
  // From flag values, in order (each ParseTierSlo'd, then Add'ed).
  static Result<SloTargets> FromFlags(const std::vector<std::string>& specs);

  // The tier's targets, or null when it is not listed.
  const TierSlo* Find(std::string_view tier) const;
  // Its index when listed, else size().
  int32_t Rank(std::string_view tier) const;
  // Ranks at or beyond this are the lowest tiers (see the header comment): max(1, size - 1).
  int32_t LowestRank() const;
  bool IsLowest(std::string_view tier) const { return Rank(tier) >= LowestRank(); }

  const std::vector<TierSlo>& tiers() const { return tiers_; }
  int32_t size() const { return static_cast<int32_t>(tiers_.size()); }
  bool empty() const { return tiers_.empty(); }

 private:
  std::vector<TierSlo> tiers_;
};

}  // namespace tarmac::control
