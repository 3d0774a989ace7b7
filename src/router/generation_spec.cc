#include "router/generation_spec.h"

#include <algorithm>
#include <stdexcept>

#include "base/check.h"
#include "base/digest.h"
#include "base/thread_role.h"
#include "router/pool_model.h"

namespace tarmac::router {

// Chat messages through the chat formatter, completion texts through the tokenizer, token-id
// prompts as given (checked by the engine).
namespace {

Result<std::vector<std::vector<int32_t>>> EncodeAfresh(const PoolModel& m, const GenerationSpec& spec) {
  std::vector<std::vector<int32_t>> ids;
  if (spec.chat) {
    auto enc = m.chat.Encode(spec.messages, spec.tools, spec.add_generation_prompt, *m.tokenizer);
    if (!enc.ok())
      return InvalidField("messages", "the chat template rejected the messages: {}", enc.status().message());
    ids.push_back(std::move(enc).value());
    return ids;
  }
  for (const PromptInput& p : spec.prompts)
    ids.push_back(p.is_ids ? p.ids : m.tokenizer->Encode(p.text, tok::EncodeOptions{true, spec.parse_special}));
  return ids;
}

}  // namespace

Result<std::vector<std::vector<int32_t>>> EncodePrompts(const PoolModel& m, const GenerationSpec& spec) {
  if (spec.encoded == nullptr) return EncodeAfresh(m, spec);
  return spec.encoded->GetOrEncode(m.name, [&] { return EncodeAfresh(m, spec); });
}

int32_t DefaultMaxTokens(bool chat, int32_t context, int32_t prompt_tokens) {
  const int32_t left = context - prompt_tokens;
  return chat ? left : std::min(16, left);
}

uint64_t PrefixNamespace(std::string_view ns_key, std::string_view model) {
  return First64(HmacSha256(ns_key, model));
}

Result<std::shared_ptr<const grammar::CompiledGrammar>> CompileConstraint(const PoolModel& m,
                                                                         const GenerationSpec& spec) {
  if (!spec.constrained()) return std::shared_ptr<const grammar::CompiledGrammar>();
  const bool tools = spec.grammar == nullptr;
  const char* field = tools ? "tool_choice" : "response_format";
  engine::GrammarCache* cache = m.engine->grammars();
  if (cache == nullptr) return InvalidField(field, "model {} has no tokenizer to constrain its output with", m.name);
  grammar::Grammar forced;
  if (tools) {
    grammar::ForcedToolCallOptions o;
    if (spec.tool_use.choice == ToolChoice::kFunction) o.function = spec.tool_use.function;
    o.parallel = spec.tool_use.parallel;
    o.json = spec.tool_use.json;
    auto g = grammar::ForcedToolCallGrammar(m.tool_format, spec.tool_use.tools, o);
    if (!g.ok()) return InvalidField("tools", "{}", g.status().message());
    forced = std::move(g).value();
  }
  auto compiled = cache->Compile(tools ? forced : *spec.grammar);
  if (!compiled.ok()) return InvalidField(field, "{}", compiled.status().message());
  return std::move(compiled).value();
}

Result<PreparedRequests> Prepare(const PoolModel& m, const GenerationSpec& spec) {
  TARMAC_CHECK(!OnIoThread() && "router::Prepare renders and encodes: never on the server's I/O thread");
  if (spec.tool_use.parsed() && m.tool_format == grammar::ToolCallFormat::kNone)
    return InvalidField("tool_choice", "model {} has no tool-call format to parse calls in (its chat template teaches "
                                       "none; serve it with --tool-call-parser, or send tool_choice 'none')", m.name);
  if (spec.fault == engine::InjectedFault::kTokenize && m.engine->config().fault_injection)
    throw std::runtime_error("injected fault 'tokenize': encoding the prompt failed");
  TARMAC_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> prompts, EncodePrompts(m, spec));
  TARMAC_ASSIGN_OR_RETURN(std::shared_ptr<const grammar::CompiledGrammar> grammar, CompileConstraint(m, spec));
  const int32_t ctx = m.max_context;
  const uint64_t ns = PrefixNamespace(spec.ns_key.empty() ? spec.tenant : spec.ns_key, m.name);
  PreparedRequests out;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int32_t len = static_cast<int32_t>(prompts[p].size());
    out.prompt_tokens.push_back(len);
    out.prompts.push_back(prompts[p]);
    const int32_t max_tokens = spec.max_tokens ? *spec.max_tokens : DefaultMaxTokens(spec.chat, ctx, len);
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
      r.grammar = grammar;
      r.prompt_logprobs = spec.prompt_logprobs;
      r.fault = spec.fault == engine::InjectedFault::kTokenize ? engine::InjectedFault::kNone : spec.fault;
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
