#include "router/cascade_target.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace tarmac::router {

Confidence Score(const std::vector<engine::TokenEvent>& events, int32_t max_tokens) {
  Confidence c;
  double sum = 0;
  c.min_margin = std::numeric_limits<double>::infinity();
  for (const engine::TokenEvent& e : events) {
    if (e.token < 0) continue;
    if (c.tokens >= max_tokens) break;
    sum += e.logprob;
    if (e.top.size() >= 2) c.min_margin = std::min(c.min_margin, static_cast<double>(e.top[0].logprob - e.top[1].logprob));
    ++c.tokens;
  }
  c.mean_logprob = c.tokens > 0 ? sum / c.tokens : 0.0;
  return c;
}

bool Confident(const Confidence& c, const CascadeParams& p) {
  return c.mean_logprob >= p.min_mean_logprob && c.min_margin >= p.min_margin;
}

CascadeTarget::CascadeTarget(PoolModel* small, PoolModel* large, CascadeParams p)
    : small_(small), large_(large), p_(std::move(p)) {
  TARMAC_CHECK(small != nullptr && large != nullptr && p_.k >= 1);
}

Result<PreparedRequests> CascadeTarget::Prepare(const GenerationSpec& spec) {
  client_top_logprobs_ = spec.sampling.top_logprobs;
  full_ = p_.full && !spec.streaming;  // a streamed answer cannot wait for its end
  TARMAC_ASSIGN_OR_RETURN(large_prepared_, router::Prepare(*large_, spec));
  GenerationSpec scored = spec;
  scored.sampling.top_logprobs = std::max(spec.sampling.top_logprobs, 2);
  return router::Prepare(*small_, scored);
}

Status CascadeTarget::Start(PreparedRequests prepared, std::function<void()> notify) {
  notify_ = notify;
  const size_t n = prepared.requests.size();
  small_target_ = std::make_unique<EngineTarget>(small_);
  TARMAC_RETURN_IF_ERROR(small_target_->Start(std::move(prepared), notify));
  held_.assign(n, {});
  released_.assign(n, 0);
  return Status::Ok();
}

void CascadeTarget::TryDecide() {
  const int32_t want = full_ ? INT32_MAX : p_.k;
  bool all_ready = true;
  weakest_ = Confidence{};
  weakest_.mean_logprob = std::numeric_limits<double>::infinity();
  weakest_.min_margin = std::numeric_limits<double>::infinity();
  bool escalate = false;
  for (size_t i = 0; i < held_.size(); ++i) {
    std::vector<engine::TokenEvent>& h = held_[i];
    auto tokens = [&] { return static_cast<int32_t>(std::count_if(h.begin(), h.end(), [](const auto& e) { return e.token >= 0; })); };
    engine::TokenEvent ev;
    while ((h.empty() || !h.back().last()) && tokens() < want && small_target_->Next(i, &ev)) h.push_back(std::move(ev));
    const bool ready = (!h.empty() && h.back().last()) || tokens() >= want;
    if (!ready) {
      all_ready = false;
      continue;
    }
    const Confidence c = Score(h, want);
    if (c.mean_logprob < weakest_.mean_logprob) weakest_.mean_logprob = c.mean_logprob;
    if (c.min_margin < weakest_.min_margin) weakest_.min_margin = c.min_margin;
    weakest_.tokens = std::max(weakest_.tokens, c.tokens);
    // A choice that failed outright (the small engine shut down) escalates too.
    if (!Confident(c, p_) || (!h.empty() && h.back().finish == engine::FinishReason::kError)) escalate = true;
  }
  if (!all_ready) return;
  decided_ = true;
  if (escalate) Escalate();
}

void CascadeTarget::Escalate() {
  small_target_->Cancel();
  large_target_ = std::make_unique<EngineTarget>(large_);
  Status st = large_target_->Start(std::move(large_prepared_), notify_);
  escalated_ = true;
  if (!st.ok()) {
    // The large model cannot take it: keep the small model's answer rather than fail.
    large_target_.reset();
    escalated_ = false;
  }
}

void CascadeTarget::Trim(engine::TokenEvent* ev) const {
  if (static_cast<int32_t>(ev->top.size()) > client_top_logprobs_) ev->top.resize(static_cast<size_t>(client_top_logprobs_));
}

bool CascadeTarget::Next(size_t i, engine::TokenEvent* ev) {
  TARMAC_CHECK(small_target_ != nullptr && i < held_.size());
  if (!decided_) {
    if (cancelled_) {
      // Cancelled before the decision: hand out the small model's events (they end cancelled).
      if (released_[i] < held_[i].size()) {
        *ev = std::move(held_[i][released_[i]++]);
      } else if (!small_target_->Next(i, ev)) {
        return false;
      }
      Trim(ev);
      return true;
    }
    TryDecide();
    if (!decided_) return false;
  }
  if (escalated_) return large_target_->Next(i, ev);
  if (released_[i] < held_[i].size()) {
    *ev = std::move(held_[i][released_[i]++]);
  } else if (!small_target_->Next(i, ev)) {
    return false;
  }
  Trim(ev);
  return true;
}

void CascadeTarget::Cancel() {
  cancelled_ = true;
  if (small_target_) small_target_->Cancel();
  if (large_target_) large_target_->Cancel();
}

}  // namespace tarmac::router
