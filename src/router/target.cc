#include "router/target.h"

#include "base/check.h"

namespace tarmac::router {

EngineTarget::EngineTarget(PoolModel* model, int32_t hold_back_tokens)
    : model_(model), hold_back_(hold_back_tokens) {
  TARMAC_CHECK(model != nullptr && hold_back_tokens >= 0);
}

EngineTarget::~EngineTarget() = default;

Result<PreparedRequests> EngineTarget::Prepare(const GenerationSpec& spec) { return router::Prepare(*model_, spec); }

Status EngineTarget::Start(PreparedRequests prepared, std::function<void()> notify) {
  std::vector<Choice> choices(prepared.requests.size());
  for (size_t i = 0; i < prepared.requests.size(); ++i) {
    auto s = model_->engine->Submit(std::move(prepared.requests[i]));
    if (!s.ok()) {
      for (size_t k = 0; k < i; ++k) model_->engine->Cancel(choices[k].stream->id());
      return s.status();
    }
    choices[i].stream = std::move(s).value();
    choices[i].released = hold_back_ == 0;
  }
  choices_ = std::move(choices);
  for (Choice& c : choices_) c.stream->SetNotifier(notify);
  return Status::Ok();
}

bool EngineTarget::Next(size_t i, engine::TokenEvent* ev) {
  TARMAC_CHECK(i < choices_.size());
  Choice& c = choices_[i];
  engine::TokenEvent e;
  while (!c.released && !c.finished && c.stream->TryNext(&e)) {
    if (e.token >= 0) ++c.tokens;
    c.finished = e.last();
    c.held.push_back(std::move(e));
    if (c.tokens >= hold_back_ || c.finished) c.released = true;
  }
  if (!c.released) return false;
  if (!c.held.empty()) {
    *ev = std::move(c.held.front());
    c.held.pop_front();
    return true;
  }
  if (c.finished || !c.stream->TryNext(ev)) return false;
  c.finished = ev->last();
  return true;
}

void EngineTarget::Cancel() {
  for (Choice& c : choices_)
    if (!c.finished) model_->engine->Cancel(c.stream->id());
}

}  // namespace tarmac::router
