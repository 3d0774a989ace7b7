// The keys of every scoped cache, in one place. Each key is a fixed prefix naming the cache,
// the tenant's digest (so a tenant's entries can be dropped together), for responses the scope's
// digest too (so one scope's can), and a SHA-256 over the canonical scope encoding and the
// entry's own parts, each length-prefixed: two keys are equal only when every part is.
//
//   tarmac:r:<tenant>:<scope>:<entry>   response cache (scope includes the model or route)
//   tarmac:retrieval:<tenant>:<entry>   retrieval results (scope without a target)
//   tarmac:tool:<tenant>:<entry>        tool results (scope without a target)
//   tarmac:s:<session>                  session state and owner
//
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/scope.h"

namespace tarmac::cache {

enum class ValueKind { kRetrieval, kTool };
const char* ValueKindName(ValueKind k);  // "retrieval", "tool"

// A response: the scope (with its target), the token ids every prompt renders to, and the
// request's output-changing parameters (a JSON object; its canonical dump is hashed, so key
// order does not matter).
std::string ResponseKey(const RequestScope& scope, const std::vector<std::vector<int32_t>>& prompts,
                        const nlohmann::json& params);
std::string ResponseTenantPrefix(std::string_view tenant);
std::string ResponseScopePrefix(const RequestScope& scope);

// A client's retrieval or tool result under its key (the scope's target is ignored).
std::string ValueKey(ValueKind kind, const RequestScope& scope, std::string_view key);
std::string ValueTenantPrefix(ValueKind kind, std::string_view tenant);

// A session's record (owner and state) by its client-chosen id.
std::string SessionKey(std::string_view session_id);
// The id a session's pinned KV prefix goes by in the engines (never 0): derived from the
// scope's namespace key, so equal session ids of two scopes never share a pin.
uint64_t SessionPinId(std::string_view ns_key, std::string_view session_id);

}  // namespace tarmac::cache
