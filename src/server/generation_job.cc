#include "server/generation_job.h"

#include "base/check.h"

namespace tarmac::server {

GenerationJob::GenerationJob(GenRequest req, std::unique_ptr<router::Target> target)
    : req_(std::move(req)), target_(std::move(target)),
      render_(req_) {
  TARMAC_CHECK(target_ != nullptr);
}

std::optional<ApiError> GenerationJob::Decide(const router::PreparedRequests& probe) {
  if (Status st = target_->Decide(req_.spec, probe); !st.ok()) return FromStatus(st);
  return std::nullopt;
}

std::optional<ApiError> GenerationJob::Prepare() {
  auto p = target_->Prepare(req_.spec);
  if (!p.ok()) return FromStatus(p.status());
  Adopt(std::move(p).value());
  return std::nullopt;
}

void GenerationJob::Adopt(router::PreparedRequests prepared) {
  prepared_ = std::move(prepared);
  prompt_tokens_ = 0;
  for (int32_t i : prepared_.prompt_index) prompt_tokens_ += prepared_.prompt_tokens[static_cast<size_t>(i)];
  render_.SetModel(target_->model());
  render_.SetRoute(target_->route_info());
  render_.SetChoices(prepared_.prompt_index, prepared_.prompts);
}

std::optional<ApiError> GenerationJob::Start(const std::function<void()>& notify) {
  if (Status st = target_->Start(std::move(prepared_), notify); !st.ok()) return FromStatus(st);
  started_ = true;
  return std::nullopt;
}

void GenerationJob::CancelAll() {
  if (started_) target_->Cancel();
}

std::optional<ApiError> GenerationJob::Fallback(const std::string& reason) {
  TARMAC_CHECK(!started_);
  if (Status st = target_->Fallback(reason); !st.ok()) return FromStatus(st);
  return std::nullopt;
}

void GenerationJob::Finished(bool error) {
  if (finished_) return;
  finished_ = true;
  target_->Finished(render_.id(), error);
}

bool GenerationJob::Poll(std::string* sse) {
  if (!started_) return false;
  std::string frames;
  for (size_t i = 0; i < render_.choices().size(); ++i) {
    engine::TokenEvent ev;
    while (!render_.choices()[i].done() && target_->Next(i, &ev)) {
      if (!released_) {
        // The answering model and the route are known once anything is released.
        render_.SetModel(target_->model());
        render_.SetRoute(target_->route_info());
        released_ = true;
      }
      render_.OnEvent(i, std::move(ev), &frames);
    }
  }
  if (sse != nullptr) *sse += frames;
  return render_.all_done();
}

}  // namespace tarmac::server
