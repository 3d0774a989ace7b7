// TenantLimiter: each tenant's share of the server beside its request-rate bucket (limits.h):
// how many generation requests it has in flight (admitted or queued) at most, and how many
// tokens (prompt + generated) it spends per second (a token bucket), so that one tenant's
// flood cannot starve the others. Limits come from flags (every tenant's default) and from the
// config file's tenants (their own).
//
// Token rate, as a debt: a request is admitted while the tenant's bucket is not in debt (level
// > 0); its prompt tokens are spent at admission, its generated tokens when it finishes (the
// level may go negative; the refill pays the debt back). The long-run rate is the limit; a
// burst is at most the bucket plus what the tenant's requests in flight generate.
//
// Not thread-safe: the server's I/O thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "server/limits.h"

namespace tarmac::server {

struct TenantLimit {
  int32_t max_concurrent = 0;  // generation requests in flight; 0: no limit
  double tokens_per_s = 0;     // prompt + generated tokens per second; 0: no limit
  double token_burst = 0;      // bucket size in tokens; 0: 10 s of tokens_per_s
  // Errors name the field (under `what`, e.g. "tenants[1]" or "--tenant-token-rate").
  Status Validate(const std::string& what) const;
};

// Why a request was refused: the 429's message, Retry-After and code.
struct TenantRefusal {
  std::string message;
  int retry_after_s = 1;
  std::string code;  // "tenant_concurrency_exceeded", "tenant_tokens_exceeded"
};

class TenantLimiter {
 public:
  // defaults: every tenant's; per_tenant: by tenant name, replacing the defaults.
  TenantLimiter(TenantLimit defaults, std::map<std::string, TenantLimit> per_tenant);

  bool enabled() const { return enabled_; }
  const TenantLimit& LimitOf(const std::string& tenant) const;
  // Whether a request of `tenant` would be refused at now_s whatever its prompt (at its
  // concurrency cap, or its token bucket empty): checked before the request is parsed and
  // prepared, so a capped tenant's flood costs the server no JSON parse or tokenization.
  // Spends no tokens and counts nothing in flight (it may record a first-seen tenant); Acquire
  // checks again.
  std::optional<TenantRefusal> Precheck(const std::string& tenant, double now_s);
  // Request `id` of `tenant` with `prompt_tokens` (over its choices) wants to start at now_s:
  // admitted (counted in flight, its prompt spent) or refused. Preconditions: id not in flight.
  std::optional<TenantRefusal> Acquire(const std::string& tenant, int64_t id, int64_t prompt_tokens, double now_s);
  // Request `id` ended having generated `generated_tokens`: leaves the flight, pays for them.
  // No-op for ids not in flight (refused, or released already).
  void Release(int64_t id, int64_t generated_tokens, double now_s);

  int32_t in_flight(const std::string& tenant) const;
  // Every tenant's in-flight count equals its requests held; counts are >= 0.
  Status CheckIntegrity() const;

 private:
  struct Tenant {
    const TenantLimit* limit;
    int32_t in_flight = 0;
    std::optional<TokenBucket> tokens;  // with a token rate
  };
  Tenant& At(const std::string& tenant);

  TenantLimit defaults_;
  std::map<std::string, TenantLimit> per_tenant_;
  bool enabled_ = false;
  std::unordered_map<std::string, Tenant> tenants_;
  std::unordered_map<int64_t, std::string> held_;  // in-flight request -> tenant
};

}  // namespace tarmac::server
