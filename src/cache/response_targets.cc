#include "cache/response_targets.h"

#include "base/check.h"

namespace tarmac::cache {

RecordingTarget::RecordingTarget(std::unique_ptr<router::Target> inner, Sink sink)
    : inner_(std::move(inner)), sink_(std::move(sink)) {
  TARMAC_CHECK(inner_ != nullptr);
}

Result<router::PreparedRequests> RecordingTarget::Prepare(const router::GenerationSpec& spec) {
  TARMAC_ASSIGN_OR_RETURN(router::PreparedRequests p, inner_->Prepare(spec));
  record_.prompt_index = p.prompt_index;
  record_.prompt_tokens = p.prompt_tokens;
  record_.choices.assign(p.prompt_index.size(), {});
  return p;
}

Status RecordingTarget::Start(router::PreparedRequests prepared, std::function<void()> notify) {
  return inner_->Start(std::move(prepared), std::move(notify));
}

bool RecordingTarget::Next(size_t choice, engine::TokenEvent* ev) {
  if (!inner_->Next(choice, ev)) return false;
  record_.choices[choice].push_back(*ev);
  return true;
}

void RecordingTarget::Cancel() {
  cancelled_ = true;
  inner_->Cancel();
}

void RecordingTarget::Finished(const std::string& response_id, bool error) {
  inner_->Finished(response_id, error);
  if (error || cancelled_ || !sink_) return;
  for (const auto& c : record_.choices) {
    if (c.empty()) return;
    const engine::FinishReason f = c.back().finish;
    if (f != engine::FinishReason::kStop && f != engine::FinishReason::kLength) return;
  }
  record_.model = inner_->model().name;
  record_.route = inner_->route_info();
  sink_(std::move(record_));
  sink_ = nullptr;
}

ReplayTarget::ReplayTarget(const router::PoolModel* model, RecordedResponse recorded)
    : model_(model), rec_(std::move(recorded)), next_(rec_.choices.size(), 0) {
  TARMAC_CHECK(model_ != nullptr && model_->name == rec_.model);
  if (rec_.route) {
    route_ = rec_.route;
    route_->reason = "response cache hit (first answered: " + route_->reason + ")";
  }
}

Result<router::PreparedRequests> ReplayTarget::Prepare(const router::GenerationSpec& spec) {
  (void)spec;  // the key covered everything the spec could change
  router::PreparedRequests p;
  p.prompt_index = rec_.prompt_index;
  p.prompt_tokens = rec_.prompt_tokens;
  return p;
}

Status ReplayTarget::Start(router::PreparedRequests prepared, std::function<void()> notify) {
  (void)prepared;
  (void)notify;  // every event is ready now; the job polls right after Start
  return Status::Ok();
}

bool ReplayTarget::Next(size_t choice, engine::TokenEvent* ev) {
  TARMAC_CHECK(choice < next_.size());
  const auto& events = rec_.choices[choice];
  if (next_[choice] >= events.size()) return false;
  *ev = events[next_[choice]++];
  if (ev->last()) ev->metrics.cached_prompt_tokens = ev->metrics.prompt_tokens;
  return true;
}

}  // namespace tarmac::cache
