#include "server/tenant_limits.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"

namespace tarmac::server {
namespace {

double BurstOf(const TenantLimit& l) { return l.token_burst > 0 ? l.token_burst : 10 * l.tokens_per_s; }

}  // namespace

Status TenantLimit::Validate(const std::string& what) const {
  if (max_concurrent < 0) return InvalidArgument("{}: max_concurrent must be >= 0 (0: no limit), got {}", what, max_concurrent);
  if (!(tokens_per_s >= 0) || !std::isfinite(tokens_per_s))
    return InvalidArgument("{}: tokens_per_s must be a number >= 0 (0: no limit), got {}", what, tokens_per_s);
  if (!(token_burst >= 0) || !std::isfinite(token_burst))
    return InvalidArgument("{}: token_burst must be a number >= 0 (0: 10 s of tokens_per_s), got {}", what, token_burst);
  if (token_burst > 0 && tokens_per_s == 0)
    return InvalidArgument("{}: token_burst needs tokens_per_s (a bucket without a rate never refills)", what);
  return Status::Ok();
}

TenantLimiter::TenantLimiter(TenantLimit defaults, std::map<std::string, TenantLimit> per_tenant)
    : defaults_(defaults), per_tenant_(std::move(per_tenant)) {
  auto on = [](const TenantLimit& l) { return l.max_concurrent > 0 || l.tokens_per_s > 0; };
  enabled_ = on(defaults_);
  for (const auto& [name, l] : per_tenant_) enabled_ = enabled_ || on(l);
}

const TenantLimit& TenantLimiter::LimitOf(const std::string& tenant) const {
  auto it = per_tenant_.find(tenant);
  return it == per_tenant_.end() ? defaults_ : it->second;
}

TenantLimiter::Tenant& TenantLimiter::At(const std::string& tenant) {
  auto [it, fresh] = tenants_.try_emplace(tenant);
  if (fresh) {
    it->second.limit = &LimitOf(tenant);
    if (it->second.limit->tokens_per_s > 0) it->second.tokens.emplace(it->second.limit->tokens_per_s, BurstOf(*it->second.limit));
  }
  return it->second;
}

std::optional<TenantRefusal> TenantLimiter::Precheck(const std::string& tenant, double now_s) {
  if (!enabled_) return std::nullopt;
  Tenant& t = At(tenant);
  const TenantLimit& l = *t.limit;
  if (l.max_concurrent > 0 && t.in_flight >= l.max_concurrent) {
    return TenantRefusal{fmt::format("tenant '{}' has {} generation requests in flight, its concurrency limit "
                                     "(max_concurrent {}); retry when one finishes",
                                     tenant, t.in_flight, l.max_concurrent),
                         1, "tenant_concurrency_exceeded"};
  }
  if (t.tokens) {
    const double level = t.tokens->Level(now_s);
    if (level <= 0) {
      const int wait = std::max(1, static_cast<int>(std::ceil(-level / t.tokens->rate())));
      return TenantRefusal{fmt::format("tenant '{}' is over its token rate limit ({} prompt + generated tokens per "
                                       "second, burst {}); retry in {} s",
                                       tenant, l.tokens_per_s, t.tokens->burst(), wait),
                           wait, "tenant_tokens_exceeded"};
    }
  }
  return std::nullopt;
}

std::optional<TenantRefusal> TenantLimiter::Acquire(const std::string& tenant, int64_t id, int64_t prompt_tokens,
                                                    double now_s) {
  if (!enabled_) return std::nullopt;
  TARMAC_CHECK(held_.count(id) == 0);
  if (auto refused = Precheck(tenant, now_s)) return refused;
  Tenant& t = At(tenant);
  if (t.tokens) t.tokens->Spend(now_s, static_cast<double>(prompt_tokens));
  ++t.in_flight;
  held_.emplace(id, tenant);
  return std::nullopt;
}

void TenantLimiter::Release(int64_t id, int64_t generated_tokens, double now_s) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  Tenant& t = At(it->second);
  --t.in_flight;
  if (t.tokens) t.tokens->Spend(now_s, static_cast<double>(generated_tokens));
  held_.erase(it);
}

int32_t TenantLimiter::in_flight(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.in_flight;
}

Status TenantLimiter::CheckIntegrity() const {
  std::unordered_map<std::string, int32_t> count;
  for (const auto& [id, tenant] : held_) ++count[tenant];
  for (const auto& [name, t] : tenants_) {
    if (t.in_flight < 0) return Internal("tenant '{}' has {} requests in flight", name, t.in_flight);
    const int32_t held = count.count(name) ? count.at(name) : 0;
    if (t.in_flight != held) return Internal("tenant '{}' counts {} requests in flight but holds {}", name, t.in_flight, held);
  }
  for (const auto& [name, n] : count)
    if (tenants_.count(name) == 0) return Internal("tenant '{}' holds {} requests but is unknown", name, n);
  return Status::Ok();
}

}  // namespace tarmac::server
