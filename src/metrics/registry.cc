#include "metrics/registry.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/check.h"

namespace tarmac::metrics {
namespace {

std::string Escape(std::string_view v) {
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

std::string Num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// `k1="v1",k2="v2"` (no braces), with an optional extra pair at the end.
std::string LabelText(const std::vector<std::string>& names, const LabelValues& values,
                      std::string_view extra_name = {}, std::string_view extra_value = {}) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    out += names[i];
    out += "=\"";
    out += Escape(values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!out.empty()) out += ',';
    out += fmt::format("{}=\"{}\"", extra_name, extra_value);
  }
  return out;
}

void Line(std::string* out, std::string_view name, const std::string& labels, const std::string& value) {
  *out += name;
  if (!labels.empty()) {
    *out += '{';
    *out += labels;
    *out += '}';
  }
  *out += ' ';
  *out += value;
  *out += '\n';
}

template <class T>
void Snap(const T& s, double, SeriesSnapshot* out);
template <>
void Snap(const Counter& s, double, SeriesSnapshot* out) { out->value = s.value(); }
template <>
void Snap(const Gauge& s, double, SeriesSnapshot* out) { out->value = s.value(); }
template <>
void Snap(const Histogram& s, double, SeriesSnapshot* out) { out->histogram = s.Read(); }

}  // namespace

const char* MetricTypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
    case MetricType::kSummary: return "summary";
  }
  return "untyped";
}

const SeriesSnapshot* FamilySnapshot::Find(const LabelValues& labels) const {
  for (const SeriesSnapshot& s : series)
    if (s.labels == labels) return &s;
  return nullptr;
}

CallbackHandle& CallbackHandle::operator=(CallbackHandle&& o) noexcept {
  if (this != &o) {
    if (family_) family_->RemoveCallback(id_);
    family_ = o.family_;
    id_ = o.id_;
    o.family_ = nullptr;
  }
  return *this;
}

CallbackHandle::~CallbackHandle() {
  if (family_) family_->RemoveCallback(id_);
}

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type, std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)) {}

void FamilyBase::CheckLabels(const LabelValues& v) const { TARMAC_CHECK(v.size() == label_names_.size()); }

CallbackHandle FamilyBase::Callback(LabelValues labels, std::function<double()> fn) {
  TARMAC_CHECK(type_ == MetricType::kCounter || type_ == MetricType::kGauge);
  CheckLabels(labels);
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_callback_++;
  callbacks_.emplace(id, Callback_{std::move(labels), std::move(fn)});
  return CallbackHandle(this, id);
}

void FamilyBase::RemoveCallback(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  callbacks_.erase(id);
}

FamilySnapshot FamilyBase::Collect(double now_s) const {
  FamilySnapshot f;
  f.name = name_;
  f.help = help_;
  f.type = type_;
  f.label_names = label_names_;
  f.quantiles = Quantiles();
  CollectOwned(now_s, &f.series);
  {
    // Callbacks run under the family lock: a handle being destroyed waits for a running read.
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, cb] : callbacks_) {
      SeriesSnapshot s;
      s.labels = cb.labels;
      s.value = cb.fn();
      f.series.push_back(std::move(s));
    }
  }
  std::stable_sort(f.series.begin(), f.series.end(),
                   [](const SeriesSnapshot& a, const SeriesSnapshot& b) { return a.labels < b.labels; });
  return f;
}

template <class T>
void Family<T>::CollectOwned(double now_s, std::vector<SeriesSnapshot>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [labels, s] : series_) {
    SeriesSnapshot snap;
    snap.labels = labels;
    if constexpr (std::is_same_v<T, WindowQuantiles>) {
      snap.window = s->Read(quantiles_, now_s);
    } else {
      Snap(*s, now_s, &snap);
    }
    out->push_back(std::move(snap));
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;
template class Family<WindowQuantiles>;

Registry::Registry(BucketBands bands) : buckets_(std::move(bands)) {}

FamilyBase* Registry::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

template <class T>
Family<T>& Registry::GetOrAdd(const std::string& name, const std::string& help, MetricType type,
                              std::vector<std::string> labels, std::function<std::unique_ptr<T>()> make,
                              std::vector<double> params, std::vector<double> quantiles) {
  std::lock_guard<std::mutex> lock(mu_);
  if (FamilyBase* f = Find(name)) {
    TARMAC_CHECK(f->type() == type && f->label_names() == labels && params_.at(f) == params);
    auto* typed = dynamic_cast<Family<T>*>(f);
    TARMAC_CHECK(typed != nullptr);
    return *typed;
  }
  auto fam = std::make_unique<Family<T>>(name, help, type, std::move(labels), std::move(make));
  fam->quantiles_ = std::move(quantiles);
  Family<T>* raw = fam.get();
  params_[raw] = std::move(params);
  by_name_.emplace(name, raw);
  families_.push_back(std::move(fam));
  return *raw;
}

Family<Counter>& Registry::Counters(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  return GetOrAdd<Counter>(name, help, MetricType::kCounter, std::move(labels),
                           [] { return std::make_unique<Counter>(); }, {});
}

Family<Gauge>& Registry::Gauges(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  return GetOrAdd<Gauge>(name, help, MetricType::kGauge, std::move(labels), [] { return std::make_unique<Gauge>(); },
                         {});
}

Family<Histogram>& Registry::Histograms(const std::string& name, const std::string& help,
                                        std::vector<std::string> labels, std::vector<double> bounds) {
  auto make = [bounds] { return std::make_unique<Histogram>(bounds); };
  return GetOrAdd<Histogram>(name, help, MetricType::kHistogram, std::move(labels), make, bounds);
}

Family<WindowQuantiles>& Registry::Windows(const std::string& name, const std::string& help,
                                           std::vector<std::string> labels, double window_s,
                                           std::vector<double> quantiles) {
  for (double q : quantiles) TARMAC_CHECK(q >= 0 && q <= 1);
  std::vector<double> params = quantiles;
  params.push_back(window_s);
  auto make = [window_s] { return std::make_unique<WindowQuantiles>(window_s); };
  return GetOrAdd<WindowQuantiles>(name, help, MetricType::kSummary, std::move(labels), make, std::move(params),
                                   quantiles);
}

std::vector<FamilySnapshot> Registry::Collect(double now_s) const {
  std::vector<FamilyBase*> fams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& f : families_) fams.push_back(f.get());
  }
  std::vector<FamilySnapshot> out;
  out.reserve(fams.size());
  for (const FamilyBase* f : fams) out.push_back(f->Collect(now_s));
  return out;
}

FamilySnapshot Registry::Collect(std::string_view name, double now_s) const {
  FamilyBase* f = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_name_.find(name);
    if (it != by_name_.end()) f = it->second;
  }
  if (f == nullptr) {
    FamilySnapshot empty;
    empty.name = std::string(name);
    return empty;
  }
  return f->Collect(now_s);
}

void RenderFamily(const FamilySnapshot& f, std::string* out) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, f.help, f.name, MetricTypeName(f.type));
  for (const SeriesSnapshot& s : f.series) {
    switch (f.type) {
      case MetricType::kCounter:
      case MetricType::kGauge:
        Line(out, f.name, LabelText(f.label_names, s.labels), Num(s.value));
        break;
      case MetricType::kHistogram: {
        const Histogram::Snapshot& h = s.histogram;
        const std::string bucket = f.name + "_bucket";
        for (size_t i = 0; i < h.bounds.size(); ++i)
          Line(out, bucket, LabelText(f.label_names, s.labels, "le", Num(h.bounds[i])), std::to_string(h.cumulative[i]));
        Line(out, bucket, LabelText(f.label_names, s.labels, "le", "+Inf"), std::to_string(h.cumulative.back()));
        const std::string labels = LabelText(f.label_names, s.labels);
        Line(out, f.name + "_sum", labels, Num(h.sum));
        Line(out, f.name + "_count", labels, std::to_string(h.count));
        break;
      }
      case MetricType::kSummary: {
        for (size_t i = 0; i < f.quantiles.size(); ++i)
          Line(out, f.name, LabelText(f.label_names, s.labels, "quantile", Num(f.quantiles[i])),
               Num(s.window.quantiles[i]));
        const std::string labels = LabelText(f.label_names, s.labels);
        Line(out, f.name + "_sum", labels, Num(s.window.sum));
        Line(out, f.name + "_count", labels, std::to_string(s.window.count));
        break;
      }
    }
  }
}

std::string Registry::Render(double now_s) const {
  std::string out;
  out.reserve(1 << 16);
  for (const FamilySnapshot& f : Collect(now_s)) RenderFamily(f, &out);
  return out;
}

}  // namespace tarmac::metrics
