// The response cache's key and plan as the server builds them (ParseGenRequest -> ScopeOf ->
// PlanResponseCache -> ResponseKey): a request that differs from another in any one key field
// (tenant, each permission scope, policy version, locale, model or route, each parameter that
// changes the output) gets another key; 10,000 random requests over several tenants never
// share a key across scopes; only deterministic requests are planned.
#include "server/server_cache.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

namespace tarmac::server {
namespace {

ServerConfig Config() {
  ServerConfig c;
  c.tenants["acme"] = {"", std::nullopt, {"accounts.read", "cards.read"}, "v1", std::nullopt};
  c.tenants["acme-fewer"] = {"", std::nullopt, {"accounts.read"}, "v1", std::nullopt};
  c.tenants["globex"] = {"", std::nullopt, {"accounts.read", "cards.read"}, "v1", std::nullopt};
  c.cached_responses["auto"] = std::nullopt;
  c.cached_responses["wp-11m"] = 60.0;
  return c;
}

struct Req {
  std::string tenant = "acme";
  Json body;
  CacheHeaders headers{};
  ServerConfig config = Config();
  ApiKind kind = ApiKind::kChat;
};

Json Body() {
  return {{"model", "auto"}, {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}, {"temperature", 0},
          {"max_tokens", 16}};
}

// The key the server would use ("" when not cached).
std::string KeyOf(const Req& r) {
  GenRequest g;
  auto e = ParseGenRequest(r.body.dump(), r.kind, &g);
  EXPECT_FALSE(e.has_value()) << e->message;
  cache::RequestScope scope;
  EXPECT_FALSE(ScopeOf(r.config, r.tenant, g.model, g.locale, r.headers, &scope).has_value());
  ResponseCachePlan plan;
  EXPECT_FALSE(PlanResponseCache(r.config, g, r.headers, &plan).has_value());
  if (!plan.active()) return "";
  return cache::ResponseKey(scope, {{1, 2, 3}}, g.key_params);
}

TEST(ServerCache, EveryKeyFieldChangesTheKey) {
  const std::string base = KeyOf(Req{"acme", Body()});
  ASSERT_FALSE(base.empty());
  std::vector<std::pair<std::string, Req>> variants;
  auto with = [&](const std::string& name, auto change) {
    Req r{"acme", Body()};
    change(r);
    variants.emplace_back(name, std::move(r));
  };
  with("tenant", [](Req& r) { r.tenant = "globex"; });
  with("permission scope removed", [](Req& r) { r.tenant = "acme-fewer"; });
  with("permission scope added", [](Req& r) { r.config.tenants["acme"].scopes.push_back("cards.write"); });
  with("policy version (config)", [](Req& r) { r.config.tenants["acme"].policy_version = "v2"; });
  with("policy version (header)", [](Req& r) { r.headers.policy_version = "v3"; });
  with("locale (field)", [](Req& r) { r.body["locale"] = "fr-FR"; });
  with("locale (Accept-Language)", [](Req& r) { r.headers.accept_language = "de-DE,de;q=0.9"; });
  with("route or model", [](Req& r) { r.body["model"] = "wp-11m"; });
  with("seed", [](Req& r) { r.body["seed"] = 7; });
  with("max_tokens", [](Req& r) { r.body["max_tokens"] = 17; });
  with("temperature (seeded)", [](Req& r) { r.body["temperature"] = 0.7, r.body["seed"] = 1; });
  with("top_p", [](Req& r) { r.body["top_p"] = 0.9; });
  with("top_k", [](Req& r) { r.body["top_k"] = 40; });
  with("min_p", [](Req& r) { r.body["min_p"] = 0.1; });
  with("presence_penalty", [](Req& r) { r.body["presence_penalty"] = 0.5; });
  with("frequency_penalty", [](Req& r) { r.body["frequency_penalty"] = 0.5; });
  with("repetition_penalty", [](Req& r) { r.body["repetition_penalty"] = 1.1; });
  with("n", [](Req& r) { r.body["n"] = 2; });
  with("stop", [](Req& r) { r.body["stop"] = "\n"; });
  with("stop_token_ids", [](Req& r) { r.body["stop_token_ids"] = {5}; });
  with("logit_bias", [](Req& r) { r.body["logit_bias"] = {{"42", 3}}; });
  with("logprobs", [](Req& r) { r.body["logprobs"] = true; });
  with("top_logprobs", [](Req& r) { r.body["logprobs"] = true, r.body["top_logprobs"] = 2; });
  with("ignore_eos", [](Req& r) { r.body["ignore_eos"] = true; });
  with("tools", [](Req& r) { r.body["tools"] = Json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}}); });
  with("task", [](Req& r) { r.body["task"] = "qa"; });
  with("sla", [](Req& r) { r.body["sla"] = "gold"; });
  with("risk", [](Req& r) { r.body["risk"] = "high"; });
  // Structured outputs and tool calls (issue 25).
  with("response_format json_object", [](Req& r) { r.body["response_format"] = {{"type", "json_object"}}; });
  with("response_format json_schema", [](Req& r) {
    r.body["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"name", "p"}, {"schema", {{"type", "object"}}}}}};
  });
  with("response_format schema", [](Req& r) {
    r.body["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"name", "p"}, {"schema", {{"type", "array"}}}}}};
  });
  with("structured_outputs regex", [](Req& r) { r.body["structured_outputs"] = {{"regex", "[a-z]+"}}; });
  with("structured_outputs choice", [](Req& r) { r.body["structured_outputs"] = {{"choice", {"yes", "no"}}}; });
  const Json tool = {{"type", "function"},
                     {"function", {{"name", "g"}, {"parameters", {{"type", "object"}, {"properties", Json::object()}}}}}};
  with("tools with parameters", [&](Req& r) { r.body["tools"] = Json::array({tool}); });
  with("tool_choice none", [&](Req& r) { r.body["tools"] = Json::array({tool}), r.body["tool_choice"] = "none"; });
  with("tool_choice required", [&](Req& r) { r.body["tools"] = Json::array({tool}), r.body["tool_choice"] = "required"; });
  with("tool_choice named", [&](Req& r) {
    r.body["tools"] = Json::array({tool});
    r.body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "g"}}}};
  });
  with("parallel_tool_calls", [&](Req& r) {
    r.body["tools"] = Json::array({tool}), r.body["tool_choice"] = "required", r.body["parallel_tool_calls"] = false;
  });
  std::map<std::string, std::string> seen = {{base, "base"}};
  for (const auto& [name, r] : variants) {
    const std::string k = KeyOf(r);
    ASSERT_FALSE(k.empty()) << name;
    auto [it, fresh] = seen.emplace(k, name);
    EXPECT_TRUE(fresh) << name << " has the key of " << it->second;
  }
  // What does not change the output does not change the key.
  Req same{"acme", Body()};
  same.body["user"] = "u-17";
  same.body["stream"] = true;
  same.body["stream_options"] = {{"include_usage", true}};
  EXPECT_EQ(KeyOf(same), base);
  same.headers.accept_language = "*";
  EXPECT_EQ(KeyOf(same), base);
  // Usage on every chunk is rendered from the same events (a hit renders it for the request).
  same.body["stream_options"]["continuous_usage_stats"] = true;
  EXPECT_EQ(KeyOf(same), base);
}

// Completions: the fields only they take (issue 25) each change the key.
TEST(ServerCache, CompletionKeyFieldsChangeTheKey) {
  auto body = [] { return Json{{"model", "auto"}, {"prompt", "hi"}, {"temperature", 0}, {"max_tokens", 16}}; };
  const std::string base = KeyOf(Req{"acme", body(), {}, Config(), ApiKind::kCompletion});
  ASSERT_FALSE(base.empty());
  std::vector<std::pair<std::string, Json>> variants;
  auto with = [&](const std::string& name, auto change) {
    Json b = body();
    change(b);
    variants.emplace_back(name, std::move(b));
  };
  with("echo", [](Json& b) { b["echo"] = true; });
  with("logprobs 0", [](Json& b) { b["logprobs"] = 0; });
  with("logprobs 2", [](Json& b) { b["logprobs"] = 2; });
  with("echo with logprobs", [](Json& b) { b["echo"] = true, b["logprobs"] = 1; });
  with("parse_special", [](Json& b) { b["parse_special"] = false; });
  with("seed", [](Json& b) { b["seed"] = 9; });
  with("response_format", [](Json& b) { b["response_format"] = {{"type", "json_object"}}; });
  with("structured_outputs grammar", [](Json& b) { b["structured_outputs"] = {{"grammar", "root ::= \"a\""}}; });
  std::map<std::string, std::string> seen = {{base, "base"}};
  for (const auto& [name, b] : variants) {
    const std::string k = KeyOf(Req{"acme", b, {}, Config(), ApiKind::kCompletion});
    ASSERT_FALSE(k.empty()) << name;
    auto [it, fresh] = seen.emplace(k, name);
    EXPECT_TRUE(fresh) << name << " has the key of " << it->second;
  }
}

TEST(ServerCache, RandomRequestsNeverShareAKeyAcrossScopes) {
  std::mt19937 rng(5);
  const char* tenants[] = {"acme", "acme-fewer", "globex"};
  const char* versions[] = {"", "v1", "v2"};
  const char* locales[] = {"", "en-gb", "fr"};
  const char* models[] = {"auto", "wp-11m"};
  std::map<std::string, std::string> scope_of_key;
  int checked = 0;
  for (int i = 0; i < 10000; ++i) {
    Req r{tenants[rng() % 3], Body()};
    r.headers.policy_version = versions[rng() % 3];
    r.body["locale"] = locales[rng() % 3];
    if (r.body["locale"] == "") r.body.erase("locale");
    r.body["model"] = models[rng() % 2];
    r.body["max_tokens"] = 1 + rng() % 4;  // the same requests recur across scopes
    if (rng() % 2) r.body["seed"] = rng() % 3;
    GenRequest g;
    ASSERT_FALSE(ParseGenRequest(r.body.dump(), ApiKind::kChat, &g).has_value());
    cache::RequestScope s;
    ASSERT_FALSE(ScopeOf(r.config, r.tenant, g.model, g.locale, r.headers, &s).has_value());
    const std::string key = KeyOf(r), scope = cache::Encode(s);
    auto [it, fresh] = scope_of_key.emplace(key, scope);
    if (!fresh) {
      EXPECT_EQ(it->second, scope) << "a key shared across scopes";
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);  // plenty of repeats within a scope
}

TEST(ServerCache, OnlyDeterministicRequestsAreCached) {
  Req r{"acme", Body()};
  r.body["temperature"] = 0.8;
  EXPECT_EQ(KeyOf(r), "");  // the route caches what it can: not this one
  r.body["seed"] = 3;
  EXPECT_NE(KeyOf(r), "");
  // Asking for a cache on a request that can never hit is an error.
  GenRequest g;
  Json b = Body();
  b["temperature"] = 0.8;
  b["cache"] = true;
  b["model"] = "other";
  ASSERT_FALSE(ParseGenRequest(b.dump(), ApiKind::kChat, &g).has_value());
  ResponseCachePlan plan;
  auto e = PlanResponseCache(Config(), g, {}, &plan);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "cache");
}

TEST(ServerCache, PlansFollowConfigRequestAndCacheControl) {
  auto plan = [](Json body, CacheHeaders h = {}) {
    GenRequest g;
    EXPECT_FALSE(ParseGenRequest(body.dump(), ApiKind::kChat, &g).has_value());
    ResponseCachePlan p;
    auto e = PlanResponseCache(Config(), g, h, &p);
    EXPECT_FALSE(e.has_value());
    return p;
  };
  Json b = Body();
  EXPECT_TRUE(plan(b).lookup);
  EXPECT_EQ(plan(b).ttl_s, 300);  // the cache's default
  b["model"] = "wp-11m";
  EXPECT_EQ(plan(b).ttl_s, 60);   // the model's
  b["model"] = "not-opted-in";
  EXPECT_FALSE(plan(b).active());
  b["cache"] = {{"ttl_s", 5}};
  EXPECT_EQ(plan(b).ttl_s, 5);
  EXPECT_FALSE(plan(b, {"", "", "no-store"}).active());
  EXPECT_FALSE(plan(b, {"", "", "max-age=0, no-cache"}).lookup);
  EXPECT_TRUE(plan(b, {"", "", "max-age=0, no-cache"}).store);
  b["cache"] = false;
  b["model"] = "auto";
  EXPECT_FALSE(plan(b).active());
  // Bad cache fields name themselves.
  GenRequest g;
  Json bad = Body();
  bad["cache"] = {{"ttl", 5}};
  EXPECT_EQ(ParseGenRequest(bad.dump(), ApiKind::kChat, &g)->param, "cache.ttl");
  bad["cache"] = {{"ttl_s", -1}};
  EXPECT_EQ(ParseGenRequest(bad.dump(), ApiKind::kChat, &g)->param, "cache.ttl_s");
  bad["cache"] = {{"ttl_s", 1e9}};
  ASSERT_FALSE(ParseGenRequest(bad.dump(), ApiKind::kChat, &g).has_value());
  ResponseCachePlan p;
  EXPECT_EQ(PlanResponseCache(Config(), g, {}, &p)->param, "cache.ttl_s");
  bad = Body();
  bad["session_id"] = "has space";
  EXPECT_EQ(ParseGenRequest(bad.dump(), ApiKind::kChat, &g)->param, "session_id");
}

}  // namespace
}  // namespace tarmac::server
