// EngineCore's fault isolation (engine_core.h, Step): failing one request whose processing
// broke, rerunning a failed batched forward pass one sequence at a time, the integrity check
// after a step with failures, the last resort after the step loop died, and the test-only
// injected faults.
#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "base/check.h"
#include "engine/engine_core.h"

namespace tarmac::engine {

void EngineCore::AbandonAll(const Status& error) {
  for (auto& [id, a] : active_) {
    TokenEvent ev;
    ev.finish = FinishReason::kError;
    ev.error = error;
    ev.metrics = a.metrics;
    a.stream->Push(std::move(ev));
  }
  active_.clear();
}

void EngineCore::FailRequest(int64_t id, const std::string& what) {
  std::fprintf(stderr, "tarmac engine '%s': request %lld failed: %s\n", config_.model_name.c_str(),
               static_cast<long long>(id), what.c_str());
  ++step_faults_;
  if (active_.count(id) == 0) return;  // it had finished already
  FinishRequest(id, FinishReason::kError, TokenEvent{},
                Internal("internal error while processing the request: {}", what));
}

void EngineCore::InjectFault(const ActiveRequest& a, InjectedFault where) const {
  if (a.req.fault != where) return;
  switch (where) {
    case InjectedFault::kCheck:
      TARMAC_CHECK(a.req.fault != InjectedFault::kCheck);  // fails: the injected broken invariant
      break;
    default:
      throw std::runtime_error(fmt::format("injected fault '{}'", InjectedFaultName(where)));
  }
}

void EngineCore::InjectStepFault(const sched::SchedulerOutput& out) const {
  for (const sched::ScheduledSeq& s : out.seqs)
    if (active_.at(s.id).req.fault == InjectedFault::kEngine)
      throw std::runtime_error("injected fault 'engine': the step failed outside any request's processing");
}

void EngineCore::ForwardHook(const sched::SchedulerOutput& out, size_t begin, size_t end) const {
  for (size_t i = begin; i < end; ++i) InjectFault(active_.at(out.seqs[i].id), InjectedFault::kKernel);
}

std::vector<std::string> EngineCore::Forward(const sched::SchedulerOutput& out) {
  const size_t n = out.seqs.size();
  std::vector<std::string> failed(n);
  try {
    ForwardHook(out, 0, n);
    model_->Forward(batch_, &cache_, &pool_threads_, &logits_);
    return failed;
  } catch (const std::exception& e) {
    if (n == 1) {
      failed[0] = std::string("the forward pass failed: ") + e.what();
      return failed;
    }
    std::fprintf(stderr, "tarmac engine '%s': a forward pass of %zu sequences failed (%s): running each alone\n",
                 config_.model_name.c_str(), n, e.what());
  }
  // Which sequence broke it: each alone (their K/V slots are rewritten with the same values;
  // nothing was committed). The others' logits land where the batch's would have.
  const int64_t V = model_->config().n_vocab;
  logits_.resize(static_cast<size_t>(batch_.logits_for.size()) * static_cast<size_t>(V));
  model::ForwardBatch one;
  std::vector<float> solo;
  for (size_t i = 0; i < n; ++i) {
    // Its tokens: up to the next sequence's first (a token tree feeds more than num_tokens).
    const int32_t tb = rows_[i].first_token, te = i + 1 < n ? rows_[i + 1].first_token : batch_.n_tokens();
    one.Clear();
    one.tokens.assign(batch_.tokens.begin() + tb, batch_.tokens.begin() + te);
    one.positions.assign(batch_.positions.begin() + tb, batch_.positions.begin() + te);
    one.slots.assign(batch_.slots.begin() + tb, batch_.slots.begin() + te);
    one.seq.assign(static_cast<size_t>(te - tb), 0);
    one.block_tables.push_back(batch_.block_tables[i]);
    if (batch_.has_trees()) {
      one.tree_mask.assign(batch_.tree_mask.begin() + tb, batch_.tree_mask.begin() + te);
      one.rope_positions.assign(batch_.rope_positions.begin() + tb, batch_.rope_positions.begin() + te);
      one.tree_begin.push_back(batch_.tree_begin[i]);
    }
    for (int32_t r = 0; r < rows_[i].count; ++r) one.logits_for.push_back(batch_.logits_for[rows_[i].begin + r] - tb);
    try {
      ForwardHook(out, i, i + 1);
      model_->Forward(one, &cache_, &pool_threads_, &solo);
      std::copy(solo.begin(), solo.begin() + static_cast<int64_t>(rows_[i].count) * V,
                logits_.begin() + static_cast<int64_t>(rows_[i].begin) * V);
    } catch (const std::exception& e) {
      failed[i] = std::string("the forward pass failed: ") + e.what();
    }
  }
  return failed;
}

void EngineCore::CommitAndFail(const sched::SchedulerOutput& out, const std::vector<std::string>& failed) {
  const bool any = std::any_of(failed.begin(), failed.end(), [](const std::string& f) { return !f.empty(); });
  if (!any) return sched_->Commit(out);
  sched::SchedulerOutput ok;
  for (size_t i = 0; i < out.seqs.size(); ++i)
    if (failed[i].empty()) ok.seqs.push_back(out.seqs[i]);
  sched_->Commit(ok);
  for (size_t i = 0; i < out.seqs.size(); ++i)
    if (!failed[i].empty()) FailRequest(out.seqs[i].id, failed[i]);
}

void EngineCore::CheckAfterFaults() const {
  if (step_faults_ == 0) return;
  // A request failed mid-step: its blocks must all be back and nobody else's state touched;
  // if not, the engine must not go on serving.
  if (Status st = CheckIntegrity(); !st.ok())
    throw std::runtime_error("the engine's state is inconsistent after a failed request: " + st.message());
}

}  // namespace tarmac::engine
