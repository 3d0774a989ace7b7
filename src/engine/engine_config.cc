#include "engine/engine_config.h"

#include "base/cpu_affinity.h"
#include "model/model_config.h"

namespace tarmac::engine {

const char* SpecModeName(SpecMode m) {
  switch (m) {
    case SpecMode::kOff: return "off";
    case SpecMode::kDraft: return "draft";
    case SpecMode::kNgram: return "ngram";
    case SpecMode::kAuto: return "auto";
  }
  return "?";
}

Result<SpecMode> ParseSpecMode(std::string_view s) {
  for (SpecMode m : {SpecMode::kOff, SpecMode::kDraft, SpecMode::kNgram, SpecMode::kAuto})
    if (s == SpecModeName(m)) return m;
  return InvalidField("spec", "speculation mode must be off, draft, ngram or auto, got '{}'", s);
}

Result<EngineConfig> ResolveEngineConfig(const model::ModelConfig& mc, EngineConfig c) {
  const sched::SchedulerConfig& s = c.sched;
  if (s.block_size < 1 || s.block_size > 1024)
    return InvalidField("block_size", "block size must be in [1, 1024], got {}", s.block_size);
  if (s.max_batched_tokens < 1)
    return InvalidField("max_batched_tokens", "max batched tokens must be >= 1, got {}", s.max_batched_tokens);
  if (s.max_running < 1)
    return InvalidField("max_running", "max running requests must be >= 1, got {}", s.max_running);
  if (c.threads < 1) return InvalidField("threads", "threads must be >= 1, got {}", c.threads);
  if (c.kv.blocks < 0) return InvalidField("kv_blocks", "KV blocks must be >= 0, got {}", c.kv.blocks);
  if (c.kv.memory_bytes < 0) return InvalidField("kv_memory", "KV memory must be >= 0");
  const int32_t k = c.spec.policy_config.max_k;
  if (k < 0 || k > speculative::kMaxDraft)
    return InvalidField("spec_k", "draft length must be in [0, {}], got {}", speculative::kMaxDraft, k);
  const double slowdown = c.spec.policy_config.max_other_slowdown;
  if (!(slowdown <= 100))  // also NaN
    return InvalidField("spec_max_slowdown", "speculation slowdown limit must be <= 100, got {}", slowdown);
  const speculative::SpecPolicyConfig& pc = c.spec.policy_config;
  if (pc.max_width < 0 || pc.max_width > speculative::kMaxWidth)
    return InvalidField("spec_tree", "tree width must be in [0, {}], got {}", speculative::kMaxWidth, pc.max_width);
  if (pc.max_branch < 0 || pc.max_branch > speculative::kMaxDraft)
    return InvalidField("spec_tree", "tree branching positions must be in [0, {}], got {}", speculative::kMaxDraft,
                        pc.max_branch);
  if (pc.max_tree_tokens < 1 || pc.max_tree_tokens > speculative::kMaxTreeNodes)
    return InvalidField("spec_tree_tokens", "tree tokens per request must be in [1, {}], got {}",
                        speculative::kMaxTreeNodes, pc.max_tree_tokens);
  if (c.spec.mode == SpecMode::kDraft && c.spec.draft_model == nullptr)
    return InvalidField("draft_model", "speculation mode 'draft' needs a draft model");
  if (c.event_capacity < 0)
    return InvalidField("event_capacity", "event capacity must be >= 0, got {}", c.event_capacity);
  if (c.model_name.empty()) return InvalidField("model_name", "the model name must not be empty");
  if (!c.cpus.empty()) TARMAC_RETURN_IF_ERROR(CheckCpus(c.cpus));
  if (c.spec.mode == SpecMode::kAuto) c.spec.policy = true;
  if (c.sched.max_context == 0) c.sched.max_context = mc.n_ctx_train;
  if (c.sched.max_context < 1 || c.sched.max_context > mc.n_ctx_train) {
    return InvalidField("max_context", "context {} is outside [1, {}] (the model's training context)",
                        c.sched.max_context, mc.n_ctx_train);
  }
  if (!c.metrics) c.metrics = std::make_shared<metrics::Registry>();
  return c;
}

}  // namespace tarmac::engine
