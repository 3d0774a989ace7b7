#include "metrics/request_bucket.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/check.h"

namespace tarmac::metrics {
namespace {

int8_t BandOf(const std::vector<int64_t>& edges, int64_t v) {
  return static_cast<int8_t>(std::upper_bound(edges.begin(), edges.end(), v) - edges.begin());
}

// "lo-hi" with hi = next edge - 1, or "lo+" for the last band.
std::string BandName(const std::vector<int64_t>& edges, int band, int64_t first_lo) {
  const int64_t lo = band == 0 ? first_lo : edges[static_cast<size_t>(band - 1)];
  if (band == static_cast<int>(edges.size())) return fmt::format("{}+", lo);
  return fmt::format("{}-{}", lo, edges[static_cast<size_t>(band)] - 1);
}

Status CheckEdges(const std::vector<int64_t>& e, const char* what) {
  if (e.size() > 15) return InvalidField(what, "{}: at most 15 band edges, got {}", what, e.size());
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i] <= 0) return InvalidField(what, "{}: band edges must be positive, got {}", what, e[i]);
    if (i > 0 && e[i] <= e[i - 1])
      return InvalidField(what, "{}: band edges must increase, got {} after {}", what, e[i], e[i - 1]);
  }
  return Status::Ok();
}

}  // namespace

const char* TemperatureBandName(TemperatureBand b) {
  switch (b) {
    case TemperatureBand::kGreedy: return "0";
    case TemperatureBand::kLow: return "low";
    case TemperatureBand::kHigh: return "high";
  }
  return "?";
}

const char* RiskName(Risk r) { return r == Risk::kHigh ? "high" : "low"; }

const char* PriorityClassName(PriorityClass p) {
  switch (p) {
    case PriorityClass::kHigh: return "high";
    case PriorityClass::kNormal: return "normal";
    case PriorityClass::kLow: return "low";
  }
  return "?";
}

Result<Risk> ParseRisk(std::string_view s) {
  if (s == "low") return Risk::kLow;
  if (s == "high") return Risk::kHigh;
  return InvalidField("risk", "risk must be 'low' or 'high', got '{}'", s);
}

Status BucketBands::Validate() const {
  TARMAC_RETURN_IF_ERROR(CheckEdges(prompt_tokens, "prompt_tokens"));
  TARMAC_RETURN_IF_ERROR(CheckEdges(max_tokens, "max_tokens"));
  if (!(low_temperature > 0) || !std::isfinite(low_temperature))
    return InvalidField("low_temperature", "low_temperature must be > 0, got {}", low_temperature);
  return Status::Ok();
}

BucketTable::BucketTable(BucketBands bands) : bands_(std::move(bands)) {
  TARMAC_CHECK(bands_.Validate().ok());
}

const std::vector<std::string>& BucketTable::LabelNames() {
  static const std::vector<std::string> kNames = {"prompt_band", "output_band", "task", "sla",
                                                  "temperature_band", "risk", "priority_class"};
  return kNames;
}

std::string BucketTable::PromptBandName(int band) const { return BandName(bands_.prompt_tokens, band, 0); }
std::string BucketTable::OutputBandName(int band) const { return BandName(bands_.max_tokens, band, 1); }

RequestBucket BucketTable::Classify(const RequestFeatures& f) const {
  RequestBucket b;
  b.prompt_band = BandOf(bands_.prompt_tokens, f.prompt_tokens);
  b.output_band = BandOf(bands_.max_tokens, f.max_tokens);
  b.temperature = f.temperature == 0.0f                ? TemperatureBand::kGreedy
                  : f.temperature <= bands_.low_temperature ? TemperatureBand::kLow
                                                       : TemperatureBand::kHigh;
  b.risk = f.risk;
  b.priority = f.priority < 0 ? PriorityClass::kHigh : f.priority == 0 ? PriorityClass::kNormal : PriorityClass::kLow;
  b.task = f.task.empty() ? std::string(kDefaultTask) : std::string(f.task);
  b.sla = f.sla.empty() ? std::string(kDefaultSla) : std::string(f.sla);
  return b;
}

BucketId BucketTable::Intern(const RequestBucket& b) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(b);
  if (it != ids_.end()) return it->second;
  const BucketId id = static_cast<BucketId>(entries_.size());
  Entry e;
  e.bucket = b;
  e.labels = {PromptBandName(b.prompt_band), OutputBandName(b.output_band), b.task, b.sla,
              TemperatureBandName(b.temperature), RiskName(b.risk), PriorityClassName(b.priority)};
  e.key = fmt::format("task={} sla={} prompt={} output={} T={} risk={} priority={}", e.labels[2], e.labels[3],
                      e.labels[0], e.labels[1], e.labels[4], e.labels[5], e.labels[6]);
  entries_.push_back(std::move(e));
  ids_.emplace(b, id);
  return id;
}

const RequestBucket& BucketTable::Get(BucketId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  TARMAC_CHECK(id >= 0 && id < static_cast<BucketId>(entries_.size()));
  return entries_[static_cast<size_t>(id)].bucket;
}

const std::vector<std::string>& BucketTable::LabelValues(BucketId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  TARMAC_CHECK(id >= 0 && id < static_cast<BucketId>(entries_.size()));
  return entries_[static_cast<size_t>(id)].labels;
}

const std::string& BucketTable::Key(BucketId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  TARMAC_CHECK(id >= 0 && id < static_cast<BucketId>(entries_.size()));
  return entries_[static_cast<size_t>(id)].key;
}

int32_t BucketTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int32_t>(entries_.size());
}

}  // namespace tarmac::metrics
