#include "server/request_plan.h"

#include "base/check.h"
#include "base/clock.h"
#include "cache/cache_keys.h"

namespace tarmac::server {

using cache::CacheKind;

Result<RequestPlan> PlanRequest(const router::PoolModel& key_model, const router::GenerationSpec& spec,
                                metrics::BucketTable& buckets, bool keyed, const cache::RequestScope& scope,
                                const nlohmann::json& key_params) {
  TARMAC_CHECK(spec.encoded != nullptr);
  RequestPlan plan;
  plan.key_model = key_model.name;
  TARMAC_ASSIGN_OR_RETURN(plan.prepared, router::Prepare(key_model, spec));
  TARMAC_CHECK(!plan.prepared.requests.empty());
  plan.features = engine::BucketFeatures(plan.prepared.requests[0].request());
  plan.bucket = buckets.Of(plan.features);
  if (keyed) plan.cache_key = cache::ResponseKey(scope, plan.prepared.prompts, key_params);
  return plan;
}

CacheAnswer LookUpCaches(cache::CacheService& caches, const std::string& response_key, const std::string& session_key,
                         const std::string& tenant) {
  CacheAnswer a;
  if (!session_key.empty()) {
    cache::Store& st = caches.store(CacheKind::kSession);
    auto rec = st.Get(session_key);
    if (!rec.ok()) {
      a.error = true;
      caches.CountError(CacheKind::kSession);
    } else if (rec->has_value()) {
      const auto j = nlohmann::json::parse(**rec, nullptr, false);
      a.not_owner = !j.is_object() || j.value("tenant", std::string()) != tenant;
    } else {
      const nlohmann::json j = {{"tenant", tenant}, {"state", nullptr}, {"updated", NowUnixSeconds()}};
      if (!st.Put(session_key, j.dump(), caches.config().session.default_ttl_s).ok()) caches.CountError(CacheKind::kSession);
    }
  }
  if (!response_key.empty() && !a.not_owner) {
    auto got = caches.store(CacheKind::kResponse).Get(response_key);
    if (!got.ok()) {
      a.error = true;
      caches.CountError(CacheKind::kResponse);
    } else if (got->has_value()) {
      auto rec = cache::DecodeRecorded(**got);
      if (rec.ok()) {
        a.hit = std::move(rec).value();
      } else {
        caches.CountError(CacheKind::kResponse);
      }
    }
  }
  return a;
}

}  // namespace tarmac::server
