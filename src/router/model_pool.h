// ModelPool: the models a server serves (each a PoolModel with its engine), looked up by name,
// and their admission (per model, with the server-wide totals). It registers the per-model
// `tarmac:num_requests_waiting` gauge: the engine's queue plus the model's admission queue.
//
// Not thread-safe: the server's I/O thread owns it (models are added there too); the engines
// inside are thread-safe, and so is the gauge it registers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "metrics/registry.h"
#include "router/admission.h"
#include "router/pool_model.h"

namespace tarmac::router {

class ModelPool {
 public:
  ModelPool(AdmissionLimits totals, std::shared_ptr<metrics::Registry> registry);
  ~ModelPool();  // shuts the engines down first

  // Preconditions: no model of that name yet (asserted).
  void Add(std::unique_ptr<PoolModel> m);
  PoolModel* Find(const std::string& name) const;
  const std::vector<std::unique_ptr<PoolModel>>& models() const { return models_; }
  Admission& admission() { return admission_; }
  const Admission& admission() const { return admission_; }
  // Stops every engine (live requests end with an error). Idempotent.
  void Shutdown();

 private:
  Admission admission_;
  std::shared_ptr<metrics::Registry> registry_;
  std::vector<std::unique_ptr<PoolModel>> models_;
  std::vector<metrics::CallbackHandle> gauges_;  // read the engines: removed before they go
};

}  // namespace tarmac::router
