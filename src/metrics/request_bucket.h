// RequestBucket: the one definition of a request's bucket, the class every per-request
// measurement, the speculation policy, the bench reports, the router's feedback and the
// controller key on. Computed once when a request is admitted (from RequestFeatures) and
// interned in a BucketTable to a small id carried on the engine request.
//
// A bucket is: prompt-length band, output band (max_tokens), task, SLA tier, temperature band,
// risk, and priority class. The band edges have defaults here (BucketBands) and can be
// configured per table. Label names and values, in one fixed order, come from the table, so a
// request's labels are the same in every series that carries them.
//
// Thread-safety: RequestBucket and BucketBands are plain values. BucketTable is thread-safe;
// Get and LabelValues return references that stay valid as long as the table.
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tarmac::metrics {

enum class TemperatureBand : uint8_t { kGreedy, kLow, kHigh };  // "0", "low", "high"
enum class Risk : uint8_t { kLow, kHigh };                       // "low", "high"
enum class PriorityClass : uint8_t { kHigh, kNormal, kLow };     // < 0, 0, > 0

const char* TemperatureBandName(TemperatureBand b);
const char* RiskName(Risk r);
const char* PriorityClassName(PriorityClass p);
// "low" / "high"; errors name the value.
Result<Risk> ParseRisk(std::string_view s);

inline constexpr std::string_view kDefaultTask = "default";
inline constexpr std::string_view kDefaultSla = "standard";

// Band edges: a value v falls in band i when edges[i-1] <= v < edges[i] (edges[-1] = 0,
// edges[size] = infinity).
struct BucketBands {
  std::vector<int64_t> prompt_tokens = {128, 512, 2048};
  std::vector<int64_t> max_tokens = {64, 256, 1024};
  float low_temperature = 0.5f;  // 0 < T <= this is "low"; above, "high"; 0 is "0"
  // Edges positive and strictly increasing, at most 15 of each; low_temperature > 0.
  Status Validate() const;
};

// What a bucket is computed from.
struct RequestFeatures {
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;
  float temperature = 1.0f;
  // {}: brace-initialisers that leave these out ({.prompt_tokens = n}) then draw no
  // missing-initializer warning.
  std::string_view task{};  // "" -> kDefaultTask
  std::string_view sla{};   // "" -> kDefaultSla
  Risk risk = Risk::kLow;
  int32_t priority = 0;   // smaller is more important
};

struct RequestBucket {
  int8_t prompt_band = 0;
  int8_t output_band = 0;
  TemperatureBand temperature = TemperatureBand::kGreedy;
  Risk risk = Risk::kLow;
  PriorityClass priority = PriorityClass::kNormal;
  std::string task;
  std::string sla;
  auto operator<=>(const RequestBucket&) const = default;
};

using BucketId = int32_t;
inline constexpr BucketId kNoBucket = -1;

class BucketTable {
 public:
  // Preconditions: bands.Validate().ok() (asserted).
  explicit BucketTable(BucketBands bands = {});
  BucketTable(const BucketTable&) = delete;
  BucketTable& operator=(const BucketTable&) = delete;

  RequestBucket Classify(const RequestFeatures& f) const;
  // The id of `b`, added on first sight. Ids are dense from 0, in order of first sight.
  BucketId Intern(const RequestBucket& b);
  BucketId Of(const RequestFeatures& f) { return Intern(Classify(f)); }

  // Preconditions: id was returned by this table.
  const RequestBucket& Get(BucketId id) const;
  // Label values in LabelNames() order.
  const std::vector<std::string>& LabelValues(BucketId id) const;
  // "task=qa sla=standard prompt=0-127 output=64-255 T=0 risk=low priority=normal".
  const std::string& Key(BucketId id) const;
  int32_t size() const;

  static const std::vector<std::string>& LabelNames();
  const BucketBands& bands() const { return bands_; }
  std::string PromptBandName(int band) const;
  std::string OutputBandName(int band) const;

 private:
  struct Entry {
    RequestBucket bucket;
    std::vector<std::string> labels;
    std::string key;
  };
  const BucketBands bands_;
  mutable std::mutex mu_;
  std::map<RequestBucket, BucketId> ids_;
  std::deque<Entry> entries_;  // by id; a deque keeps references stable as it grows
};

}  // namespace tarmac::metrics
