// Registry: every metric series of a process (or of one benchmark run), by family. The engine,
// the model pool and the server register their families and series here; `/metrics` only
// renders (Prometheus text format 0.0.4), and reports read the same values through Collect().
// A new metric is one registration plus the line that updates it.
//
// A family has a name, a help text, a type and label names; a series is one set of label
// values. Series are created on first use and live as long as the registry (callers keep the
// reference: the hot path never looks a series up). A callback series is computed when read
// (gauges that need the KV cache, counters another component keeps): its function runs on the
// reading thread and must be thread-safe; the handle removes it when destroyed.
//
// The registry also owns the BucketTable that per-bucket series take their labels from.
//
// Thread-safety: everything is thread-safe. Registering takes the registry's lock, creating a
// series its family's; updating a series is lock-free (counters, gauges) or a short lock.
// Preconditions (asserted): a name is registered with one type, label names (and bounds or
// window); label values match the label names in number.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/request_bucket.h"
#include "metrics/series.h"
#include "metrics/window_quantiles.h"

namespace tarmac::metrics {

enum class MetricType { kCounter, kGauge, kHistogram, kSummary };
const char* MetricTypeName(MetricType t);  // Prometheus TYPE: counter, gauge, histogram, summary

using LabelValues = std::vector<std::string>;

// One series as read: `value` for counters and gauges, `histogram` or `window` otherwise.
struct SeriesSnapshot {
  LabelValues labels;
  double value = 0;
  Histogram::Snapshot histogram;
  WindowQuantiles::Summary window;
};
struct FamilySnapshot {
  std::string name, help;
  MetricType type = MetricType::kCounter;
  std::vector<std::string> label_names;
  std::vector<double> quantiles;       // summaries: the q of each window quantile
  std::vector<SeriesSnapshot> series;  // sorted by label values
  // The series with these label values, or null.
  const SeriesSnapshot* Find(const LabelValues& labels) const;
};

class FamilyBase;

// Removes a callback series when destroyed. Move-only; must not outlive its registry.
class CallbackHandle {
 public:
  CallbackHandle() = default;
  CallbackHandle(FamilyBase* family, uint64_t id) : family_(family), id_(id) {}
  CallbackHandle(CallbackHandle&& o) noexcept : family_(o.family_), id_(o.id_) { o.family_ = nullptr; }
  CallbackHandle& operator=(CallbackHandle&& o) noexcept;
  ~CallbackHandle();

 private:
  FamilyBase* family_ = nullptr;
  uint64_t id_ = 0;
};

class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // A series computed when read (counters and gauges only).
  [[nodiscard]] CallbackHandle Callback(LabelValues labels, std::function<double()> fn);

  FamilySnapshot Collect(double now_s) const;

 protected:
  void CheckLabels(const LabelValues& v) const;
  virtual void CollectOwned(double now_s, std::vector<SeriesSnapshot>* out) const = 0;
  virtual std::vector<double> Quantiles() const { return {}; }
  mutable std::mutex mu_;

 private:
  friend class CallbackHandle;
  void RemoveCallback(uint64_t id);
  const std::string name_, help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  struct Callback_ {
    LabelValues labels;
    std::function<double()> fn;
  };
  std::map<uint64_t, Callback_> callbacks_;
  uint64_t next_callback_ = 1;
};

template <class T>
class Family final : public FamilyBase {
 public:
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::function<std::unique_ptr<T>()> make)
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)), make_(std::move(make)) {}

  // The series with these label values, created on first use.
  T& With(const LabelValues& labels) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = series_.find(labels);
    if (it != series_.end()) return *it->second;
    CheckLabels(labels);
    return *series_.emplace(labels, make_()).first->second;
  }

 private:
  void CollectOwned(double now_s, std::vector<SeriesSnapshot>* out) const override;
  std::vector<double> Quantiles() const override { return quantiles_; }
  friend class Registry;
  std::function<std::unique_ptr<T>()> make_;
  std::map<LabelValues, std::unique_ptr<T>> series_;
  std::vector<double> quantiles_;  // WindowQuantiles families only
};

class Registry {
 public:
  explicit Registry(BucketBands bands = {});
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Get-or-create by name (a second registration returns the first family).
  Family<Counter>& Counters(const std::string& name, const std::string& help, std::vector<std::string> labels);
  Family<Gauge>& Gauges(const std::string& name, const std::string& help, std::vector<std::string> labels);
  Family<Histogram>& Histograms(const std::string& name, const std::string& help, std::vector<std::string> labels,
                                std::vector<double> bounds);
  // Rendered as a Prometheus summary: the window's quantiles, _sum and _count.
  Family<WindowQuantiles>& Windows(const std::string& name, const std::string& help, std::vector<std::string> labels,
                                   double window_s, std::vector<double> quantiles);

  // Every family in registration order, read at `now_s` (windows need the time).
  std::vector<FamilySnapshot> Collect(double now_s) const;
  // One family (empty snapshot when the name is unknown).
  FamilySnapshot Collect(std::string_view name, double now_s) const;
  // Prometheus text exposition of Collect(now_s).
  std::string Render(double now_s) const;

  BucketTable& buckets() { return buckets_; }
  const BucketTable& buckets() const { return buckets_; }

 private:
  FamilyBase* Find(const std::string& name) const;
  // `params` (bounds, window and quantiles) must match too on a second registration.
  template <class T>
  Family<T>& GetOrAdd(const std::string& name, const std::string& help, MetricType type,
                      std::vector<std::string> labels, std::function<std::unique_ptr<T>()> make,
                      std::vector<double> params, std::vector<double> quantiles = {});

  BucketTable buckets_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_;
  std::map<const FamilyBase*, std::vector<double>> params_;
  std::map<std::string, FamilyBase*, std::less<>> by_name_;
};

// Appends `family` in the Prometheus text format to *out.
void RenderFamily(const FamilySnapshot& family, std::string* out);

}  // namespace tarmac::metrics
