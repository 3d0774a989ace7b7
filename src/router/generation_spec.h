// GenerationSpec: what a client asked to generate, independent of the API that asked (OpenAI
// completions or chat) and of the model that will answer; and Prepare, which turns a spec into
// one model's engine requests: renders chat messages through the model's template, encodes
// prompts with its tokenizer, fills max_tokens' default, fans out n choices per prompt (choice
// j seeded seed + j), compiles the output's grammar (CompileConstraint), and validates each
// request with the model's engine. Errors carry the field ("messages" for a chat prompt's
// problems).
//
// Plain values; Prepare is thread-safe (the engine's Validate is).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_types.h"
#include "grammar/grammar.h"
#include "grammar/tool_call_grammar.h"
#include "metrics/request_bucket.h"
#include "prefix/session_pins.h"
#include "sampling/sampler.h"

namespace tarmac::router {

struct PoolModel;

// A request's prompts as each model encoded them: one request is rendered and encoded once per
// model however often it is prepared (its response-cache key, a route's probe, the chosen model,
// a fallback to the baseline). Filled by EncodePrompts; shared by the copies of one spec.
// Thread-safe: preparation runs on worker threads.
class EncodedPrompts {
 public:
  using Prompts = std::vector<std::vector<int32_t>>;
  // `model`'s prompts, from `encode` the first time (an error is kept as well: the same inputs
  // fail the same way). `encode` runs under the lock: one encode per model, never two at once.
  template <typename Encode>
  Result<Prompts> GetOrEncode(const std::string& model, Encode&& encode) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_model_.find(model);
    if (it == by_model_.end()) it = by_model_.emplace(model, encode()).first;
    return it->second;
  }

 private:
  std::mutex mu_;
  std::map<std::string, Result<Prompts>> by_model_;  // by PoolModel::name
};

struct PromptInput {
  bool is_ids = false;
  std::string text;
  std::vector<int32_t> ids;
};

// Which tools the model may call (OpenAI's tools, tool_choice, parallel_tool_calls).
enum class ToolChoice {
  kNone,      // no tools, or tool_choice "none": the output is content
  kAuto,      // the model may call: its output is parsed in the model's tool-call format
  kRequired,  // it must call one or more of the tools (forced by a grammar)
  kFunction,  // it must call `function` (forced by a grammar)
};

struct ToolUse {
  std::vector<grammar::ToolSpec> tools;  // validated; names unique
  ToolChoice choice = ToolChoice::kNone;
  std::string function;                  // kFunction
  bool parallel = true;                  // several calls allowed
  grammar::JsonSchemaOptions json;       // for the forced calls' parameter schemas
  bool parsed() const { return choice != ToolChoice::kNone; }
  bool forced() const { return choice == ToolChoice::kRequired || choice == ToolChoice::kFunction; }
};

struct GenerationSpec {
  bool chat = false;
  nlohmann::ordered_json messages;        // chat: validated, content flattened to strings
  nlohmann::ordered_json tools;           // chat: null or the tools array (passed to the template)
  bool add_generation_prompt = true;
  std::vector<PromptInput> prompts;       // completions: one or more
  std::optional<int32_t> max_tokens;      // none: chat the rest of the context, completions 16
  int32_t n = 1;                          // choices per prompt
  sampling::SamplingParams sampling;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t priority = 0;                   // smaller is more important
  bool speculative = true;                // false: never speculate
  std::string task;                       // the request bucket's task ("" = default)
  std::string sla;                        // SLA tier ("" = default)
  metrics::Risk risk = metrics::Risk::kLow;
  bool risk_given = false;                // risk came from the request or the tenant (else rules may set it)
  std::string tenant = "default";         // who asked
  std::string ns_key;                     // the request scope's namespace key (cache::NamespaceKey,
                                          // secret-derived on the server); "": the tenant name
  prefix::SessionRetain session;          // id 0: not part of a session
  bool streaming = false;                 // the answer streams (a target may not wait for its end)
  std::string last_user_message;          // chat: the last user message's text (routing rules)
  // The grammar every output must follow (response_format json_object / json_schema, or
  // structured_outputs); model-independent, compiled per model by Prepare. Null: none.
  std::shared_ptr<const grammar::Grammar> grammar;
  ToolUse tool_use;
  bool parse_special = true;              // completions: special-token text in prompts is parsed
  int32_t prompt_logprobs = -1;           // completions echo with logprobs: alternatives per prompt token
  // Test aid (x-tarmac-debug-fault with --debug-fault-injection): the fault each engine request
  // carries; kTokenize makes Prepare's encoding throw when the model's engine allows faults.
  engine::InjectedFault fault = engine::InjectedFault::kNone;
  // Null: every Prepare encodes afresh. Set (RequestPlan does) when the spec's prompts cannot
  // change any more: then each model encodes them once for all the spec's copies.
  std::shared_ptr<EncodedPrompts> encoded;

  // The output is constrained by a grammar (structured output or a forced tool call).
  bool constrained() const { return grammar != nullptr || tool_use.forced(); }
  // A cascade may answer it: not constrained (the held-back attempt would be judged on
  // grammar-chosen tokens) and no prompt logprobs (they belong to one model's tokenization).
  bool cascadable() const { return !constrained() && prompt_logprobs < 0; }
};

// The grammar a spec's output follows on one model: the structured-output grammar, or the
// one forcing a tool call in the model's tool-call format, compiled for the model's vocabulary
// (cached per model); null when the output is free. Errors name the field (tool_choice when
// the model has no tool-call format, response_format for a grammar beyond the limits).
Result<std::shared_ptr<const grammar::CompiledGrammar>> CompileConstraint(const PoolModel& model,
                                                                         const GenerationSpec& spec);

// One model's engine requests for a spec, in choice order (choice i is request i).
struct PreparedRequests {
  std::vector<engine::ValidRequest> requests;
  std::vector<int32_t> prompt_index;   // [choices] which prompt each choice continues
  std::vector<int64_t> prompt_tokens;  // [prompts]
  std::vector<std::vector<int32_t>> prompts;  // [prompts] their token ids (usage and echo render them)
  int64_t admission_tokens = 0;        // prompt + max_tokens over all choices
};

// Renders, encodes (once per model with spec.encoded), compiles and validates; never on the
// server's I/O thread outside an InlineWorkScope (base/thread_role.h: checked).
Result<PreparedRequests> Prepare(const PoolModel& model, const GenerationSpec& spec);

// The one default of max_tokens when a request gives none: chat runs to the end of the
// context, a completion takes 16 tokens (both capped by what the context has left).
int32_t DefaultMaxTokens(bool chat, int32_t context, int32_t prompt_tokens);

// The token ids of each prompt of spec as `model` renders and encodes them (what Prepare
// prefills, before any check). Errors: the chat template rejected the messages.
Result<std::vector<std::vector<int32_t>>> EncodePrompts(const PoolModel& model, const GenerationSpec& spec);

// The prefix-cache namespace of (scope, model): HMAC-SHA-256 of the model's name under the
// scope's namespace key, derived on the server and never sent by clients, so no scope can reuse
// another scope's cached prefix.
uint64_t PrefixNamespace(std::string_view ns_key, std::string_view model);

}  // namespace tarmac::router
