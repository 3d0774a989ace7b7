// FlowRegistry: the generations a server has admitted or queued, by generation id: what the
// admission queue starts when a slot frees, what a drain waits for and aborts. It owns the
// bookkeeping between the pool's admission queue, the tenant limiter and the flows; the server
// (and a test's fake services) call it for FlowServices' Track, Release and Transfer.
//
// Not thread-safe: the server's I/O thread only. Admitted flows are started through `post`
// (not from inside the call that made room), so a flow never runs inside another's step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "router/admission.h"
#include "server/tenant_limits.h"

namespace tarmac::server {

class GenerationFlow;

class FlowRegistry {
 public:
  using Post = std::function<void(std::function<void()>)>;
  // Preconditions: admission and tenants outlive the registry.
  FlowRegistry(router::Admission* admission, TenantLimiter* tenants, Post post);

  int64_t NextId() { return next_id_++; }
  void Track(int64_t id, std::shared_ptr<GenerationFlow> flow);
  // `id` left the queue (was_running: or the engine): its slot and its tenant's share go back
  // (paying for generated_tokens at now_s); the flows that made room for start.
  void Release(int64_t id, bool was_running, int64_t generated_tokens, double now_s);
  // `id`'s slot moved to `model` (a cascade escalated): the flows that made room for start.
  void Transfer(int64_t id, const std::string& model);
  size_t size() const { return flows_.size(); }
  bool empty() const { return flows_.empty(); }
  // Every tracked flow (a drain aborts them).
  std::vector<std::shared_ptr<GenerationFlow>> All() const;
  void Clear() { flows_.clear(); }

 private:
  void StartAll(const std::vector<int64_t>& ids);

  router::Admission* admission_;
  TenantLimiter* tenants_;
  Post post_;
  int64_t next_id_ = 1;
  std::map<int64_t, std::shared_ptr<GenerationFlow>> flows_;
};

}  // namespace tarmac::server
