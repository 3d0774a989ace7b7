#include "engine/engine_types.h"

#include <algorithm>

namespace tarmac::engine {

namespace {
constexpr const char* kFinishNames[kFinishReasons] = {"stop", "length", "abort", "error"};
}  // namespace

int FinishReasonIndex(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return 0;
    case FinishReason::kLength: return 1;
    case FinishReason::kCancelled: return 2;
    default: return 3;
  }
}

const char* FinishReasonName(FinishReason r) {
  return r == FinishReason::kNone ? "" : kFinishNames[FinishReasonIndex(r)];
}

namespace {
constexpr InjectedFault kFaults[] = {InjectedFault::kTokenize, InjectedFault::kDetokenize, InjectedFault::kKernel,
                                     InjectedFault::kKvAlloc,  InjectedFault::kCheck,      InjectedFault::kEngine};
}  // namespace

const char* InjectedFaultName(InjectedFault f) {
  switch (f) {
    case InjectedFault::kNone: return "";
    case InjectedFault::kTokenize: return "tokenize";
    case InjectedFault::kDetokenize: return "detokenize";
    case InjectedFault::kKernel: return "kernel";
    case InjectedFault::kKvAlloc: return "kv_alloc";
    case InjectedFault::kCheck: return "check";
    case InjectedFault::kEngine: return "engine";
  }
  return "";
}

Result<InjectedFault> ParseInjectedFault(std::string_view name) {
  std::string known;
  for (InjectedFault f : kFaults) {
    if (name == InjectedFaultName(f)) return f;
    known += std::string(known.empty() ? "" : ", ") + InjectedFaultName(f);
  }
  return InvalidArgument("unknown fault '{}' (one of: {})", name, known);
}

metrics::RequestFeatures BucketFeatures(const EngineRequest& r) {
  metrics::RequestFeatures f;
  f.prompt_tokens = static_cast<int64_t>(r.prompt.size());
  f.max_tokens = r.max_tokens;
  f.temperature = r.sampling.temperature;
  f.task = r.task;
  f.sla = r.sla;
  f.risk = r.risk;
  f.priority = r.priority;
  return f;
}

void SpecCounts::Add(const SpecCounts& o) {
  decisions += o.decisions;
  fallbacks += o.fallbacks;
  drafts += o.drafts;
  draft_tokens += o.draft_tokens;
  accepted_tokens += o.accepted_tokens;
  if (accepted_at.size() < o.accepted_at.size()) accepted_at.resize(o.accepted_at.size(), 0);
  for (size_t i = 0; i < o.accepted_at.size(); ++i) accepted_at[i] += o.accepted_at[i];
}

}  // namespace tarmac::engine
