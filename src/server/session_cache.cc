// Session: a generation request's cache phase (server_internal.h): scope, session ownership,
// response-cache lookup, then the run (replayed from a hit, or recorded for the cache).
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "cache/cache_keys.h"
#include "cache/response_targets.h"
#include "router/generation_spec.h"
#include "server/server_internal.h"

namespace tarmac::server {
namespace {

using cache::CacheKind;

std::string HeaderOf(const http::request<http::string_body>& req, std::string_view name) {
  auto it = req.find(boost::beast::string_view(name.data(), name.size()));
  return it == req.end() ? std::string() : std::string(it->value());
}

}  // namespace

struct Session::CacheAnswer {
  bool not_owner = false;  // the session belongs to another tenant
  bool error = false;      // a store failed (counted; the request runs as a miss)
  std::optional<cache::RecordedResponse> hit;
};

CacheHeaders Session::RequestCacheHeaders() const {
  CacheHeaders h;
  if (!parser_) return h;
  const auto& req = parser_->get();
  h.policy_version = HeaderOf(req, "x-tarmac-policy-version");
  h.accept_language = HeaderOf(req, "accept-language");
  h.cache_control = HeaderOf(req, "cache-control");
  return h;
}

void Session::BeginGeneration(GenRequest req, const std::string& tenant) {
  const CacheHeaders headers = RequestCacheHeaders();
  if (auto e = ScopeOf(srv_->config, tenant, req.model, req.locale, headers, &scope_)) return RespondError(*e);
  if (auto e = PlanResponseCache(srv_->config, req, headers, &cache_plan_)) return RespondError(*e);
  req.spec.ns_key = cache::NamespaceKey(srv_->caches->secret(), scope_);
  session_id_ = req.session_id;
  req.spec.session = SessionRetention(srv_->config, tenant, req.spec.ns_key, session_id_);
  cache_key_.clear();
  cache_status_.clear();
  cache_bucket_ = metrics::kNoBucket;
  // The key holds the prompts as the model (a route: its baseline) renders them.
  const std::string& key_model = srv_->IsRoute(req.model) ? srv_->router->baseline(req.model) : req.model;
  const router::PoolModel* m = cache_plan_.active() ? srv_->FindModel(key_model) : nullptr;
  const bool cheap = CheapToPrepare(false);
  pending_ = std::make_unique<GenRequest>(std::move(req));
  if (m == nullptr) return LookUpCache(tenant);  // no key (no model: Prepare reports it)
  // Encoded off the I/O thread (session_prepare.cc); the request is the worker's meanwhile.
  auto held = std::make_shared<std::unique_ptr<GenRequest>>(std::move(pending_));
  OffIoThread([m, held, tenant]() -> Then {
    auto prompts = std::make_shared<Result<std::vector<std::vector<int32_t>>>>(router::EncodePrompts(*m, (*held)->spec));
    return [m, held, prompts, tenant](Session* s) {
      s->pending_ = std::move(*held);
      s->SetCacheKey(*m, *prompts);
      s->LookUpCache(tenant);
    };
  }, cheap);
}

void Session::SetCacheKey(const router::PoolModel& m, const Result<std::vector<std::vector<int32_t>>>& prompts) {
  if (!prompts.ok()) return;  // Prepare reports the prompt's problem
  const GenRequest& req = *pending_;
  cache_key_ = cache::ResponseKey(scope_, *prompts, req.key_params);
  int64_t tokens = 0;
  for (const auto& p : *prompts) tokens += static_cast<int64_t>(p.size());
  metrics::RequestFeatures f;
  f.prompt_tokens = tokens;
  f.max_tokens = req.spec.max_tokens.value_or(req.spec.chat ? m.max_context - tokens : 16);
  f.temperature = req.spec.sampling.temperature;
  f.task = req.spec.task;
  f.sla = req.spec.sla;
  f.risk = req.spec.risk;
  f.priority = req.spec.priority;
  cache_bucket_ = srv_->config.metrics->buckets().Of(f);
  cache_status_ = "miss";
}

void Session::LookUpCache(const std::string& tenant) {
  const bool lookup = !cache_key_.empty() && cache_plan_.lookup;
  if (!lookup && session_id_.empty()) return RunGeneration(std::nullopt);

  // Off the I/O thread when the store blocks: ownership of the session, then the lookup.
  std::shared_ptr<cache::CacheService> caches = srv_->caches;
  const std::string response_key = lookup ? cache_key_ : std::string();
  const std::string session_key = session_id_.empty() ? std::string() : cache::SessionKey(session_id_);
  // The job holds the session: nothing else does while the cache answers.
  std::shared_ptr<Session> self = shared_from_this();
  asio::io_context* ioc = &srv_->ioc;
  auto job = [caches, response_key, session_key, tenant, self, ioc] {
    CacheAnswer a;
    if (!session_key.empty()) {
      cache::Store& st = caches->store(CacheKind::kSession);
      auto rec = st.Get(session_key);
      if (!rec.ok()) {
        a.error = true;
        caches->CountError(CacheKind::kSession);
      } else if (rec->has_value()) {
        const auto j = nlohmann::json::parse(**rec, nullptr, false);
        a.not_owner = !j.is_object() || j.value("tenant", std::string()) != tenant;
      } else {
        const nlohmann::json j = {{"tenant", tenant}, {"state", nullptr}, {"updated", NowUnixSeconds()}};
        if (!st.Put(session_key, j.dump(), caches->config().session.default_ttl_s).ok()) caches->CountError(CacheKind::kSession);
      }
    }
    if (!response_key.empty() && !a.not_owner) {
      auto got = caches->store(CacheKind::kResponse).Get(response_key);
      if (!got.ok()) {
        a.error = true;
        caches->CountError(CacheKind::kResponse);
      } else if (got->has_value()) {
        auto rec = cache::DecodeRecorded(**got);
        if (rec.ok()) {
          a.hit = std::move(rec).value();
        } else {
          caches->CountError(CacheKind::kResponse);
        }
      }
    }
    asio::post(*ioc, [self, a = std::move(a)]() mutable {
      try {
        self->OnCacheAnswer(std::move(a));
      } catch (const std::exception& e) {
        self->InternalError("preparing", e);
      }
    });
  };
  if (!caches->Submit(std::move(job))) {
    caches->CountError(CacheKind::kResponse);
    CacheAnswer busy;
    busy.error = true;
    OnCacheAnswer(std::move(busy));
  }
}

void Session::OnCacheAnswer(CacheAnswer a) {
  if (state_ == State::kClosed || !pending_) return;
  if (a.not_owner) {
    pending_.reset();
    return RespondError(NotFound("no session '" + session_id_ + "'", "session_id"));
  }
  const router::PoolModel* answered = a.hit ? srv_->FindModel(a.hit->model) : nullptr;
  if (!cache_key_.empty() && cache_plan_.lookup) srv_->caches->CountLookup(CacheKind::kResponse, cache_bucket_, answered != nullptr);
  if (answered == nullptr) return RunGeneration(std::nullopt);
  // What the hit saved, priced on the answering model's measured step costs.
  const int64_t prefill = a.hit->total_prompt_tokens(), decode = a.hit->total_output_tokens();
  const double seconds = answered->engine->prefill_costs().Seconds(static_cast<double>(prefill)) +
                         static_cast<double>(decode) * answered->engine->decode_costs().Seconds(1);
  srv_->caches->CountSaved(CacheKind::kResponse, cache_bucket_, prefill, decode, seconds);
  cache_status_ = "hit";
  RunGeneration(std::move(a.hit));
}

void Session::RunGeneration(std::optional<cache::RecordedResponse> hit) {
  GenRequest req = std::move(*pending_);
  pending_.reset();
  std::unique_ptr<router::Target> target;
  if (hit) {
    const router::PoolModel* m = srv_->FindModel(hit->model);
    target = std::make_unique<cache::ReplayTarget>(m, std::move(*hit));
  } else {
    if (srv_->IsRoute(req.model)) {
      target = srv_->router->MakeTarget(req.model, req.spec.tenant);
    } else {
      target = std::make_unique<router::EngineTarget>(srv_->FindModel(req.model));  // a model by name: no routing
    }
    if (!cache_key_.empty()) {
      std::weak_ptr<cache::CacheService> weak = srv_->caches;
      auto sink = [weak, key = cache_key_, ttl = cache_plan_.ttl_s](cache::RecordedResponse r) {
        auto caches = weak.lock();
        if (!caches) return;
        std::string bytes = cache::EncodeRecorded(r);
        if (static_cast<int64_t>(bytes.size()) > caches->config().response.max_entry_bytes) return;  // too big to keep
        caches->Submit([caches, key, bytes = std::move(bytes), ttl] {
          if (!caches->store(CacheKind::kResponse).Put(key, bytes, ttl).ok()) caches->CountError(CacheKind::kResponse);
        });
      };
      target = std::make_unique<cache::RecordingTarget>(std::move(target), std::move(sink));
    }
  }
  gen_ = std::make_unique<GenerationJob>(std::move(req), std::move(target));
  client_gone_ = timed_out_ = false;
  headers_sent_ = false;
  aborted_.reset();
  PrepareGeneration();
}

void Session::CountSessionUse(const GenerationJob& job) {
  const auto& choices = job.render().choices();
  if (choices.empty() || cache_status_ == "hit") return;  // a replay computed nothing
  int32_t cached = 0;
  for (const ChoiceState& c : choices) cached = std::max(cached, c.metrics.cached_prompt_tokens);
  const metrics::BucketId bucket = choices[0].metrics.bucket;
  srv_->caches->CountLookup(CacheKind::kSession, bucket, cached > 0);
  if (cached > 0) {
    const router::PoolModel* m = srv_->FindModel(job.model_name());
    const double seconds = m ? m->engine->prefill_costs().Seconds(cached) : 0.0;
    srv_->caches->CountSaved(CacheKind::kSession, bucket, cached, 0, seconds);
  }
}

}  // namespace tarmac::server
