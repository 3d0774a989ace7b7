#include "server/flow_registry.h"

#include "base/check.h"
#include "server/generation_flow.h"

namespace tarmac::server {

FlowRegistry::FlowRegistry(router::Admission* admission, TenantLimiter* tenants, Post post)
    : admission_(admission), tenants_(tenants), post_(std::move(post)) {
  TARMAC_CHECK(admission_ != nullptr && tenants_ != nullptr && post_ != nullptr);
}

void FlowRegistry::Track(int64_t id, std::shared_ptr<GenerationFlow> flow) { flows_[id] = std::move(flow); }

void FlowRegistry::Release(int64_t id, bool was_running, int64_t generated_tokens, double now_s) {
  tenants_->Release(id, generated_tokens, now_s);
  auto it = flows_.find(id);
  if (it == flows_.end()) return;
  std::shared_ptr<GenerationFlow> keep = it->second;  // the flow may be running this call
  flows_.erase(it);
  if (was_running) {
    StartAll(admission_->Finish(id));
  } else {
    admission_->Withdraw(id);
  }
}

void FlowRegistry::Transfer(int64_t id, const std::string& model) { StartAll(admission_->Transfer(id, model)); }

void FlowRegistry::StartAll(const std::vector<int64_t>& ids) {
  for (int64_t next : ids) {
    auto n = flows_.find(next);
    if (n == flows_.end()) continue;
    std::shared_ptr<GenerationFlow> f = n->second;
    post_([f] { f->Admitted(); });
  }
}

std::vector<std::shared_ptr<GenerationFlow>> FlowRegistry::All() const {
  std::vector<std::shared_ptr<GenerationFlow>> out;
  for (const auto& [id, f] : flows_) out.push_back(f);
  return out;
}

}  // namespace tarmac::server
