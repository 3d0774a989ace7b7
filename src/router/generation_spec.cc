#include "router/generation_spec.h"

#include <algorithm>

#include "base/digest.h"
#include "router/pool_model.h"

namespace tarmac::router {

// Chat messages through the chat formatter, completion texts through the tokenizer, token-id
// prompts as given (checked by the engine).
Result<std::vector<std::vector<int32_t>>> EncodePrompts(const PoolModel& m, const GenerationSpec& spec) {
  std::vector<std::vector<int32_t>> ids;
  if (spec.chat) {
    auto text = m.chat.Render(spec.messages, spec.tools, spec.add_generation_prompt);
    if (!text.ok())
      return InvalidField("messages", "the chat template rejected the messages: {}", text.status().message());
    ids.push_back(m.tokenizer->Encode(*text, m.chat.encode_options()));
    return ids;
  }
  for (const PromptInput& p : spec.prompts)
    ids.push_back(p.is_ids ? p.ids : m.tokenizer->Encode(p.text, tok::EncodeOptions{true, false}));
  return ids;
}

uint64_t PrefixNamespace(std::string_view ns_key, std::string_view model) {
  return First64(HmacSha256(ns_key, model));
}

Result<PreparedRequests> Prepare(const PoolModel& m, const GenerationSpec& spec) {
  TARMAC_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> prompts, EncodePrompts(m, spec));
  const int32_t ctx = m.max_context;
  const uint64_t ns = PrefixNamespace(spec.ns_key.empty() ? spec.tenant : spec.ns_key, m.name);
  PreparedRequests out;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int32_t len = static_cast<int32_t>(prompts[p].size());
    out.prompt_tokens.push_back(len);
    const int32_t max_tokens = spec.max_tokens ? *spec.max_tokens : (spec.chat ? ctx - len : std::min(16, ctx - len));
    for (int32_t j = 0; j < spec.n; ++j) {
      engine::EngineRequest r;
      r.prompt = prompts[p];
      r.sampling = spec.sampling;
      if (spec.sampling.seed) r.sampling.seed = *spec.sampling.seed + static_cast<uint64_t>(j);
      r.max_tokens = max_tokens;
      r.ignore_eos = spec.ignore_eos;
      r.stop_token_ids = spec.stop_token_ids;
      r.stop = spec.stop;
      r.ns = ns;
      r.session = spec.session;
      r.priority = spec.priority;
      r.speculative = spec.speculative;
      r.task = spec.task;
      r.sla = spec.sla;
      r.risk = spec.risk;
      auto v = m.engine->Validate(std::move(r));
      if (!v.ok()) {
        const Status& st = v.status();
        if (spec.chat && st.field() == "prompt") return st.WithField("messages", st.reason());
        return st;
      }
      out.requests.push_back(std::move(v).value());
      out.prompt_index.push_back(static_cast<int32_t>(p));
      out.admission_tokens += len + max_tokens;
    }
  }
  return out;
}

}  // namespace tarmac::router
