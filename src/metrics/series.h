// The value types behind every metric series: Counter (monotonic), Gauge (set/add) and
// Histogram (fixed bucket bounds, Prometheus semantics). A series is owned by its Registry
// family (registry.h) and lives as long as the registry; callers keep the reference.
//
// Thread-safety: every method of every type is safe from any thread. Counters and gauges are
// lock-free atomics (relaxed: a reader sees each value whole, not a snapshot across series);
// a histogram takes a short lock per observation so its buckets, sum and count agree.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace tarmac::metrics {

class Counter {
 public:
  // Preconditions: v >= 0 (asserted in debug builds).
  void Add(double v = 1.0);
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0.0};
};

class Gauge {
 public:
  void Set(double v) { v_.store(v, std::memory_order_relaxed); }
  void Add(double v) { v_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0.0};
};

class Histogram {
 public:
  // Preconditions: bounds strictly increasing and finite (asserted); +Inf is implicit.
  explicit Histogram(std::span<const double> bounds);

  void Observe(double x);
  // Several observations under one lock (a request's inter-token gaps).
  void ObserveAll(std::span<const double> xs);

  struct Snapshot {
    std::vector<double> bounds;       // upper bounds, +Inf excluded
    std::vector<uint64_t> cumulative; // [bounds.size() + 1]: observations <= bound, last = all
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace tarmac::metrics
