#include "router/admission.h"

#include "base/check.h"

namespace tarmac::router {

Admission::Model& Admission::At(const std::string& model) {
  auto it = models_.find(model);
  if (it == models_.end()) {
    auto m = std::make_unique<Model>();
    m->limits = totals_;
    it = models_.emplace(model, std::move(m)).first;
  }
  return *it->second;
}

void Admission::SetModelLimits(const std::string& model, AdmissionLimits limits) { At(model).limits = limits; }

int32_t Admission::running(const std::string& model) const {
  auto it = models_.find(model);
  return it == models_.end() ? 0 : it->second->running;
}

int32_t Admission::queued(const std::string& model) const {
  auto it = models_.find(model);
  return it == models_.end() ? 0 : it->second->queued.load(std::memory_order_relaxed);
}

Admission::Decision Admission::Arrive(const std::string& model, int64_t id, int64_t tokens, int32_t priority) {
  TARMAC_CHECK(entries_.count(id) == 0);
  Model& m = At(model);
  if (running_total_ < totals_.max_concurrent && m.running < m.limits.max_concurrent && m.queue.empty()) {
    ++running_total_;
    ++m.running;
    entries_.emplace(id, Entry{&m, true, {}, tokens});
    return Decision::kRun;
  }
  const bool total_full = queued() >= totals_.max_queue || queued_tokens_ + tokens > totals_.max_queue_tokens;
  const bool model_full = static_cast<int32_t>(m.queue.size()) >= m.limits.max_queue ||
                          m.queued_tokens + tokens > m.limits.max_queue_tokens;
  if (total_full || model_full) return Decision::kRejected;
  const Key key{priority, seq_++, id};
  m.queue.insert(key);
  m.queued_tokens += tokens;
  m.queued.store(static_cast<int32_t>(m.queue.size()), std::memory_order_relaxed);
  queued_.insert(id);
  queued_tokens_ += tokens;
  entries_.emplace(id, Entry{&m, false, key, tokens});
  return Decision::kQueued;
}

void Admission::Withdraw(int64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.running) return;
  Entry& e = it->second;
  e.model->queue.erase(e.key);
  e.model->queued_tokens -= e.tokens;
  e.model->queued.store(static_cast<int32_t>(e.model->queue.size()), std::memory_order_relaxed);
  queued_.erase(id);
  queued_tokens_ -= e.tokens;
  entries_.erase(it);
}

std::vector<int64_t> Admission::Transfer(int64_t id, const std::string& model) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.running) return {};
  Model& to = At(model);
  if (it->second.model == &to) return {};
  --it->second.model->running;
  ++to.running;
  it->second.model = &to;
  return StartWaiting();
}

void Admission::Start(int64_t id, Entry& e) {
  Model* m = e.model;
  m->queue.erase(e.key);
  m->queued_tokens -= e.tokens;
  m->queued.store(static_cast<int32_t>(m->queue.size()), std::memory_order_relaxed);
  queued_.erase(id);
  queued_tokens_ -= e.tokens;
  e.running = true;
  ++m->running;
  ++running_total_;
}

std::vector<int64_t> Admission::Finish(int64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.running) return {};
  --it->second.model->running;
  --running_total_;
  entries_.erase(it);
  return StartWaiting();
}

std::vector<int64_t> Admission::StartWaiting() {
  std::vector<int64_t> start;
  while (running_total_ < totals_.max_concurrent) {
    // The most important head among the queues of models with a free slot.
    const Key* best = nullptr;
    for (const auto& [name, m] : models_) {
      if (m->queue.empty() || m->running >= m->limits.max_concurrent) continue;
      if (best == nullptr || *m->queue.begin() < *best) best = &*m->queue.begin();
    }
    if (best == nullptr) break;
    const int64_t next = std::get<2>(*best);
    Start(next, entries_.at(next));
    start.push_back(next);
  }
  return start;
}

}  // namespace tarmac::router
