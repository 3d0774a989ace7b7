#include "engine/engine_types.h"

#include <algorithm>

namespace tarmac::engine {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "";
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
