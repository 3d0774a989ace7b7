// The deployment file: a full example parses into every section; every kind of bad entry fails
// with the file, the YAML path of the entry and why.
#include "config/serve_config.h"

#include <gtest/gtest.h>

#include "router/policy_argmin.h"

namespace tarmac::config {
namespace {

const char* kFull = R"(
models:
  - path: models/wp-1m-f16.gguf
    tier: small
    price_per_1k: 0.02
    threads: 1
    allowed_risk: [low]
    allowed_sla: [standard, bronze]
    max_concurrent: 8
    max_queue: 16
    cache_responses: {ttl_s: 30}
  - path: models/wp-11m-f16.gguf
    name: large
    price_per_1k: measured
api_key_file: keys.txt
tenants:
  - name: acme
    api_key_file: acme.txt
    sla: gold
    risk: high
    scopes: [accounts.read]
    policy_version: "2026-11"
    session_max_blocks: 64
  - name: beta
slos:
  gold: {ttft_ms: 200, tpot_ms: 50}
  standard: {ttft_ms: 1000}
default_task: chat
task_rules:
  - match: "(?i)translate"
    task: translate
  - match: "password"
    risk: high
routes:
  - name: auto
    baseline: large
    policy:
      rules:
        - when: {risk: high}
          use: large
        - when: {prompt_tokens: {max: 200}, task: [qa, chat], sla: standard, tenant: beta, max_tokens: {min: 1}, matches: "x+"}
          use: {cascade: {small: wp-1m-f16, large: large, k: 4, min_mean_logprob: -2.5, min_margin: 0.1, mode: full}}
      otherwise:
        argmin: {models: [wp-1m-f16, large], lambda_cost: 1, lambda_latency: 2, lambda_quality: 3, explore: 0.1, decay: 0.9, seed: 7}
  - name: cheap
    baseline: wp-1m-f16
    cache_responses: true
cache:
  backend: redis
  url: redis://10.0.0.7:6380/1
  secret_file: ns.key
  response: {max_bytes: 1000000, ttl_s: 60, max_ttl_s: 600, max_entry_bytes: 50000}
  session: {ttl_s: 900, max_blocks: 256}
)";

TEST(ServeConfig, FullExample) {
  auto c = ParseServeConfig(kFull, "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->models.size(), 2u);
  EXPECT_EQ(c->models[0].info.name, "wp-1m-f16");  // the file stem
  EXPECT_EQ(*c->models[0].info.price_per_1k, 0.02);
  EXPECT_EQ(c->models[0].info.allowed_risk, std::vector<metrics::Risk>{metrics::Risk::kLow});
  EXPECT_EQ(c->models[0].info.allowed_sla, (std::vector<std::string>{"standard", "bronze"}));
  EXPECT_EQ(*c->models[0].max_concurrent, 8);
  EXPECT_EQ(c->models[1].info.name, "large");
  EXPECT_FALSE(c->models[1].info.price_per_1k.has_value());  // measured
  EXPECT_EQ(c->models[1].info.allowed_risk.size(), 2u);
  EXPECT_EQ(c->api_key_file, "keys.txt");
  ASSERT_NE(c->tenant("acme"), nullptr);
  EXPECT_EQ(c->tenant("acme")->sla, "gold");
  EXPECT_EQ(*c->tenant("acme")->risk, metrics::Risk::kHigh);
  EXPECT_EQ(c->tenant("acme")->scopes, std::vector<std::string>{"accounts.read"});
  ASSERT_EQ(c->slos.size(), 2u);
  EXPECT_EQ(c->router.task_rules.size(), 2u);
  EXPECT_TRUE(c->router.task_rules[0].pattern.Search("Please TRANSLATE this"));
  ASSERT_EQ(c->router.routes.size(), 2u);
  std::vector<std::string> used;
  c->router.routes[0].policy->Models(&used);
  EXPECT_EQ(used, (std::vector<std::string>{"large", "wp-1m-f16", "large", "wp-1m-f16", "large"}));
  EXPECT_EQ(c->router.routes[1].policy, nullptr);
  EXPECT_EQ(c->tenant("acme")->policy_version, "2026-11");
  EXPECT_EQ(*c->tenant("acme")->session_max_blocks, 64);
  EXPECT_EQ(c->cache.backend, cache::CacheConfig::Backend::kRedis);
  EXPECT_EQ(c->cache.redis_url, "redis://10.0.0.7:6380/1");
  EXPECT_EQ(c->cache_secret_file, "ns.key");
  EXPECT_EQ(c->cache.response.max_bytes, 1000000);
  EXPECT_EQ(c->cache.response.max_ttl_s, 600);
  EXPECT_EQ(c->cache.session.default_ttl_s, 900);
  EXPECT_EQ(c->cache.session_max_blocks, 256);
  EXPECT_EQ(c->cache.retrieval.max_entry_bytes, cache::CacheLimits{}.max_entry_bytes);  // defaults stay
  ASSERT_EQ(c->cached_responses.size(), 2u);
  EXPECT_EQ(*c->cached_responses.at("wp-1m-f16"), 30);
  EXPECT_FALSE(c->cached_responses.at("cheap").has_value());  // the cache's default TTL
}

struct Bad {
  const char* yaml;
  const char* path;   // the YAML path the error must name
  const char* words;  // and something of why
};

TEST(ServeConfig, BadEntriesNameTheirPath) {
  const std::string m = "models: [{path: a.gguf}, {path: b.gguf}]\n";
  const Bad cases[] = {
      {"", "(top level)", "'models'"},
      {"models: []", "models", "non-empty list"},
      {"models: [{name: x}]", "models[0]", "needs 'path'"},
      {"models: [{path: a.gguf, tier: 3 4}]", "models[0].tier", "letters, digits"},
      {"models: [{path: a.gguf, threads: 0}]", "models[0].threads", "[1, 256]"},
      {"models: [{path: a.gguf, threads: two}]", "models[0].threads", "expected an integer"},
      {"models: [{path: a.gguf, price_per_1k: -1}]", "models[0].price_per_1k", ">= 0"},
      {"models: [{path: a.gguf, allowed_risk: [medium]}]", "models[0].allowed_risk[0]", "'low' or 'high'"},
      {"models: [{path: a.gguf, colour: red}]", "models[0].colour", "unknown key"},
      {"models: [{path: a.gguf}, {path: x/a.gguf}]", "models[1].name", "two models are named 'a'"},
      {"models: [{path: a.gguf}]\nbogus: 1", "bogus", "unknown key"},
      {"models: [{path: a.gguf}]\ntenants: [{sla: gold}]", "tenants[0]", "needs 'name'"},
      {"models: [{path: a.gguf}]\ntenants: [{name: a}, {name: a}]", "tenants[1].name", "defined twice"},
      {"models: [{path: a.gguf}]\nslos: {gold: {ttft: 3}}", "slos.gold.ttft", "unknown key"},
      {"models: [{path: a.gguf}]\nslos: {gold: {ttft_ms: fast}}", "slos.gold.ttft_ms", "expected a number"},
      {"models: [{path: a.gguf}]\ntask_rules: [{match: '('}]", "task_rules[0]", "sets 'task', 'risk' or both"},
      {"models: [{path: a.gguf}]\ntask_rules: [{match: '(', task: t}]", "task_rules[0].match", "does not compile"},
      {"models: [{path: a.gguf}]\nroutes: [{name: auto}]", "routes[0]", "needs 'name' and 'baseline'"},
      {"models: [{path: a.gguf, cache_responses: maybe}]", "models[0].cache_responses", "true or false"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, cache_responses: {ttl_s: 0}}]",
       "routes[0].cache_responses.ttl_s", "> 0"},
      {"models: [{path: a.gguf}]\ncache: {backend: redis, url: 'redis://h:0'}", "cache.url", "port"},
      {"models: [{path: a.gguf}]\ncache: {url: 'redis://h'}", "cache.url", "backend: redis"},
      {"models: [{path: a.gguf}]\ncache: {tool: {max_bytes: 0}}", "cache.tool.max_bytes", "[1,"},
      {"models: [{path: a.gguf}]\ncache: {response: {ttl_s: 9, max_ttl_s: 3}}", "cache.response", "below ttl_s"},
      {"models: [{path: a.gguf}]\ntenants: [{name: t, session_max_blocks: 0}]", "tenants[0].session_max_blocks", "[1,"},
      {"models: [{path: a.gguf}]\nroutes: [{name: auto, baseline: zz}]", "routes[0].baseline", "not one of the models"},
      {"models: [{path: a.gguf}]\nroutes: [{name: a, baseline: a}]", "routes[0].name", "name of a model"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a}, {name: r, baseline: a}]", "routes[1].name", "defined twice"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: zz}]", "routes[0].policy", "no model named 'zz'"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {cascade: {small: zz, large: a, min_margin: 1}}}]",
       "routes[0].policy.cascade.small", "no model named 'zz'"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {argmin: {models: [a, zz]}}}]",
       "routes[0].policy.argmin.models[1]", "no model named 'zz'"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {rules: [{use: a}, {use: {model: zz}}]}}]",
       "routes[0].policy.rules[1].use.model", "no model named 'zz'"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {rules: [], otherwise: zz}}]",
       "routes[0].policy.otherwise", "no model named 'zz'"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {argmin: {}}}]", "routes[0].policy.argmin", "needs 'models'"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {argmin: {models: [a], explore: 2}}}]",
       "routes[0].policy.argmin.explore", "[0, 1]"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {cascade: {small: a, large: a, k: 3}}}]",
       "routes[0].policy.cascade", "the same model"},
      {"models: [{path: a.gguf}, {path: b.gguf}]\nroutes: [{name: r, baseline: a, policy: {cascade: {small: a, large: b}}}]",
       "routes[0].policy.cascade", "escalation thresholds"},
      {"models: [{path: a.gguf}, {path: b.gguf}]\nroutes: [{name: r, baseline: a, policy: {cascade: {small: a, large: b, "
       "min_margin: 1, k: 0}}}]",
       "routes[0].policy.cascade.k", "[1, 1024]"},
      {"models: [{path: a.gguf}, {path: b.gguf}]\nroutes: [{name: r, baseline: a, policy: {cascade: {small: a, large: b, "
       "min_margin: 1, mode: later}}}]",
       "routes[0].policy.cascade.mode", "'stream' or 'full'"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {rules: [{when: {risk: high}}]}}]",
       "routes[0].policy.rules[0]", "needs 'use'"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {rules: [{when: {colour: red}, use: a}]}}]",
       "routes[0].policy.rules[0].when.colour", "unknown key"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {rules: [{when: {prompt_tokens: {min: 9, max: 3}}, use: a}]}}]",
       "routes[0].policy.rules[0].when.prompt_tokens", "above max"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {rules: [{when: {task: []}, use: a}]}}]",
       "routes[0].policy.rules[0].when.task", "non-empty list"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {rules: [{when: {matches: '[z'}, use: a}]}}]",
       "routes[0].policy.rules[0].when.matches", "does not compile"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: {argmin: {models: [a]}, model: a}}]",
       "routes[0].policy", "one of cascade / argmin / model"},
      {"models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: [a]}]", "routes[0].policy", "got a list"},
  };
  for (const Bad& b : cases) {
    auto c = ParseServeConfig(b.yaml, "t.yaml");
    ASSERT_FALSE(c.ok()) << b.yaml;
    const std::string& msg = c.status().message();
    EXPECT_EQ(msg.rfind("t.yaml: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(std::string(b.path) + ":"), std::string::npos) << b.yaml << "\n -> " << msg;
    EXPECT_NE(msg.find(b.words), std::string::npos) << b.yaml << "\n -> " << msg;
  }
  (void)m;
}

TEST(ServeConfig, NotYamlSaysWhere) {
  auto c = ParseServeConfig("models: [{path: a.gguf\n", "t.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not valid YAML at line"), std::string::npos) << c.status().message();
  EXPECT_FALSE(LoadServeConfig("/nonexistent/t.yaml").ok());
}

TEST(ServeConfig, DeepPoliciesAreRefusedNotRecursedForever) {
  std::string p = "a";
  for (int i = 0; i < 40; ++i) p = "{rules: [], otherwise: " + p + "}";
  auto c = ParseServeConfig("models: [{path: a.gguf}]\nroutes: [{name: r, baseline: a, policy: " + p + "}]", "t.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("deeper than 16"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace tarmac::config
