#include "router/model_pool.h"

#include "base/check.h"

namespace tarmac::router {

ModelPool::ModelPool(AdmissionLimits totals, std::shared_ptr<metrics::Registry> registry)
    : admission_(totals), registry_(std::move(registry)) {
  TARMAC_CHECK(registry_ != nullptr);
}

ModelPool::~ModelPool() { Shutdown(); }

void ModelPool::Add(std::unique_ptr<PoolModel> m) {
  TARMAC_CHECK(Find(m->name) == nullptr);
  const PoolModel* raw = m.get();
  const Admission* adm = &admission_;
  gauges_.push_back(registry_->Gauges("tarmac:num_requests_waiting",
                                      "Requests waiting: engine queue plus server admission queue.", {"model_name"})
                        .Callback({m->name}, [raw, adm] {
                          return static_cast<double>(raw->engine->num_waiting() + adm->queued(raw->name));
                        }));
  models_.push_back(std::move(m));
}

PoolModel* ModelPool::Find(const std::string& name) const {
  for (const auto& m : models_)
    if (m->name == name) return m.get();
  return nullptr;
}

void ModelPool::Shutdown() {
  gauges_.clear();
  for (auto& m : models_) m->engine->Shutdown();
}

}  // namespace tarmac::router
