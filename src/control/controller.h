// Controller: the degradation controller of a server. Per model a DegradationMachine
// (degradation.h) is fed each tick with the model's signals (its tiers' p99 TTFT / TPOT from
// the SloTracker's control window, KV usage and per-bucket draft acceptance from its engine)
// and its plan is applied only through runtime knobs (EngineClient::SetKnobs, starting from
// the knobs the engine had when added) and admission (Admit, asked by the server for every
// generation request: 429 + Retry-After for a shed tier, a max_tokens cap, a priority class
// below the others' for a deprioritized tier), plus a
// RouteDegrader where one is set. Every action is logged with its reason, counted in
// `tarmac:controller_actions_total{model_name,action,reason}`, and kept (the latest 64) for
// the SLO report with the current state (View). `tarmac:controller_level{model_name}` is the
// level (0 normal .. 3 shedding).
//
// While the controller runs it owns the engines' knobs: nobody else may SetKnobs.
//
// Owns its machines, the action log and its tick thread (Start/Stop). Borrows the engines
// (they must outlive Stop()) and the degrader. Thread-safety: AddModel and SetRouteDegrader
// before Start; Tick from one thread at a time (the tick thread once started); Admit, View and
// Models from any thread.
#pragma once

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "control/degradation.h"
#include "control/route_degrader.h"
#include "control/slo_tracker.h"
#include "engine/engine_client.h"
#include "metrics/registry.h"

namespace tarmac::control {

struct AdmitDecision {
  bool shed = false;           // answer 429 with Retry-After
  int32_t retry_after_s = 0;
  int32_t max_tokens_cap = 0;  // > 0: max_tokens at most this
  int32_t min_priority = INT32_MIN;  // > INT32_MIN: the request's priority at least this
  std::string reason;          // of the shedding / the cap
};

struct ActionRecord {
  double time_s = 0;  // NowSeconds() clock
  std::string action, reason, detail;
  Level level = Level::kNormal;  // after the action
};

// A model's controller state, as the SLO report shows it.
struct ControllerView {
  Level level = Level::kNormal;
  double level_since_s = 0;
  ControlPlan plan;
  engine::EngineKnobs knobs;  // in force (as last applied)
  AdmitDecision lowest_tiers; // what Admit answers for the lowest tiers
  std::vector<ActionRecord> recent;                  // oldest first
  std::map<std::pair<std::string, std::string>, int64_t> action_counts;  // (action, reason)
};

class Controller {
 public:
  // Preconditions: config.Validate().ok(); tracker and registry non-null (asserted).
  Controller(ControllerConfig config, std::shared_ptr<SloTracker> tracker,
             std::shared_ptr<metrics::Registry> registry);
  ~Controller();  // Stop()
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Preconditions: before Start; a new name; the engine outlives Stop().
  void AddModel(const std::string& name, engine::EngineClient* engine);
  void SetRouteDegrader(RouteDegrader* d);

  void Start();  // ticks every config().interval_s on its own thread
  void Stop();   // joins the thread; the knobs stay as they are. Idempotent.
  // One evaluation of every model at `now_s` (NowSeconds clock).
  void Tick(double now_s);

  AdmitDecision Admit(const std::string& model, std::string_view tier) const;
  ControllerView View(const std::string& model) const;
  std::vector<std::string> Models() const;
  const ControllerConfig& config() const { return config_; }

 private:
  struct Model {
    std::string name;
    engine::EngineClient* engine = nullptr;
    engine::EngineKnobs baseline;
    DegradationMachine machine;
    std::deque<std::pair<double, std::map<metrics::BucketId, engine::SpecCounts>>> spec_history;
    engine::EngineKnobs applied;
    bool routed_smaller = false;
    AdmitDecision lowest;          // guarded by mu_, like the three below
    ControlPlan shown_plan;
    engine::EngineKnobs shown_knobs;
    double level_since_s = 0;
    std::deque<ActionRecord> recent;
    std::map<std::pair<std::string, std::string>, int64_t> counts;  // guarded by mu_
    std::atomic<int> level{0};
    metrics::CallbackHandle level_gauge;
    explicit Model(const ControllerConfig& c) : machine(c) {}
  };
  ModelSignals Signals(Model& m, double now_s);
  engine::EngineKnobs KnobsFor(const Model& m, const ControlPlan& p) const;
  void Apply(Model& m, const ControlPlan& p, const std::vector<Transition>& changes, double now_s);
  void Loop();

  const ControllerConfig config_;
  std::shared_ptr<SloTracker> tracker_;
  std::shared_ptr<metrics::Registry> registry_;
  metrics::Family<metrics::Counter>* actions_;
  RouteDegrader* degrader_ = nullptr;
  std::vector<std::unique_ptr<Model>> models_;
  mutable std::mutex mu_;  // the admission decisions, action logs and views
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tarmac::control
