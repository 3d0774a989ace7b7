// CascadeTarget: the small model answers first; nothing reaches the client until its first k
// tokens (every choice's, or the whole answer in `full` mode) have been scored; then either the
// small model's answer streams on, or the small model is cancelled and the large one answers
// (it reuses whatever it has cached of the prompt). Confidence of a choice over those tokens:
// the mean logprob of the chosen tokens and the smallest top-1/top-2 logprob margin; the
// request escalates when any choice falls below a threshold.
//
// The small model's requests ask for 2 alternatives per token (the margin needs them); what
// reaches the client is trimmed back to what it asked for.
//
// Not thread-safe: one generation job on the server's I/O thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "router/policy.h"
#include "router/target.h"

namespace tarmac::router {

// Confidence of one choice's tokens (TokenEvents with token >= 0): mean chosen logprob and the
// smallest top-1/top-2 margin (+infinity without alternatives).
struct Confidence {
  double mean_logprob = 0;
  double min_margin = 0;
  int32_t tokens = 0;
};
Confidence Score(const std::vector<engine::TokenEvent>& events, int32_t max_tokens);
// Whether a choice with this confidence keeps the small model's answer.
bool Confident(const Confidence& c, const CascadeParams& p);

class CascadeTarget final : public Target {
 public:
  // Preconditions: small and large outlive the target; p.small / p.large name them.
  CascadeTarget(PoolModel* small, PoolModel* large, CascadeParams p);

  const PoolModel& model() const override { return escalated_ ? *large_ : *small_; }
  Result<PreparedRequests> Prepare(const GenerationSpec& spec) override;
  Status Start(PreparedRequests prepared, std::function<void()> notify) override;
  bool Next(size_t choice, engine::TokenEvent* ev) override;
  void Cancel() override;
  bool holds_back() const override { return true; }

  bool decided() const { return decided_; }
  bool escalated() const { return escalated_; }
  // The weakest choice's confidence at the decision.
  const Confidence& confidence() const { return weakest_; }
  const CascadeParams& params() const { return p_; }

 private:
  // Buffers the small model's events until every choice has k tokens (or ended), then decides.
  void TryDecide();
  void Escalate();
  void Trim(engine::TokenEvent* ev) const;

  PoolModel* small_;
  PoolModel* large_;
  CascadeParams p_;
  int32_t client_top_logprobs_ = 0;
  std::unique_ptr<EngineTarget> small_target_, large_target_;
  PreparedRequests large_prepared_;
  std::function<void()> notify_;
  std::vector<std::vector<engine::TokenEvent>> held_;  // [choice] buffered small-model events
  std::vector<size_t> released_;                       // [choice] held events handed out
  bool full_ = false;  // deciding on whole answers (full mode, not streamed)
  bool decided_ = false, escalated_ = false, cancelled_ = false;
  Confidence weakest_;
};

}  // namespace tarmac::router
