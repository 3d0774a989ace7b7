// ServeConfig: the deployment file of `tarmac serve --config FILE` (YAML): the models to serve
// and what each may serve, the tenants with their defaults, the SLO targets per tier, and the
// routes (virtual model names with a policy tree and a baseline) with the task rules. A bad
// file fails to load with an error that names the file, the YAML path of the bad entry
// (`routes[0].policy.rules[2].when.task`) and why; unknown keys are errors too.
//
//   models:                       # at least one
//     - path: models/wp-1m-f16.gguf
//       name: wp-1m               # default: the file stem
//       tier: small               # descriptive
//       price_per_1k: 0.02        # or "measured" (the default: CPU-seconds per 1000 tokens)
//       threads: 1                # engine threads (default: --threads)
//       cpus: [1]                 # CPUs its engine's threads run on, one each when there are
//                                 # enough (default: --pin-threads; naming cpus on any model
//                                 # leaves the models without them unpinned)
//       allowed_risk: [low]       # default: [low, high]
//       allowed_sla: [standard]   # default: every tier
//       max_concurrent: 64        # this model's share of admission (default: the totals)
//       max_queue: 256
//       cache_responses: false    # requests naming this model: responses cached by default
//                                 # (true, or {ttl_s: 600}; deterministic requests only)
//   api_key_file: keys.txt        # "KEY TENANT" lines (as --api-key-file)
//   tenants:
//     - name: acme
//       api_key_file: acme.txt    # its keys ("KEY" lines), optional
//       sla: gold                 # defaults for its requests
//       risk: high
//       scopes: [accounts.read]   # permission scopes: part of every cache key
//       policy_version: "2026-11" # part of every cache key (x-tarmac-policy-version overrides)
//       session_max_blocks: 512   # KV blocks its sessions keep pinned per model
//       max_concurrent: 8         # its generation requests in flight (0: none; default: the flag's)
//       tokens_per_s: 2000        # prompt + generated tokens per second (token bucket; 0: none)
//       token_burst: 20000        # the bucket (default: 10 s of tokens_per_s)
//   slos:                         # p99 targets per SLA tier, ranked in the order given
//     gold: {ttft_ms: 200, tpot_ms: 50}   # (first = top tier); both targets, each > 0
//     standard: {ttft_ms: 1000, tpot_ms: 200}
//   default_task: chat
//   task_rules: [{match: "(?i)translate", task: translate}, {match: "password", risk: high}]
//   cache:                        # the scoped caches (defaults: embedded, the sizes below)
//     backend: memory             # or redis, with url: redis://127.0.0.1:6379/0
//     secret_file: ns.key         # HMAC key of prefix namespaces (default: random per start);
//                                 # replicas that share prefix-aware routing share it
//     response: {max_bytes: 268435456, ttl_s: 300, max_ttl_s: 86400, max_entry_bytes: 4194304}
//     retrieval: {max_bytes: 67108864, ttl_s: 3600, max_ttl_s: 86400, max_entry_bytes: 262144}
//     tool: {...}                 # as retrieval
//     session: {ttl_s: 1800, max_blocks: 1024, max_entry_bytes: 65536}  # state and KV pins
//   routes:
//     - name: auto
//       baseline: wp-11m
//       cache_responses: {ttl_s: 300}
//       policy:                   # a model name, or one of:
//         rules:
//           - when: {risk: high, prompt_tokens: {max: 200}, task: [qa, chat], sla: gold,
//                    tenant: acme, max_tokens: {min: 1}, matches: "(?i)invoice"}
//             use: wp-11m         # a policy node
//         otherwise: {argmin: {models: [wp-1m, wp-11m], lambda_cost: 1, lambda_latency: 1,
//                              lambda_quality: 2, explore: 0.05, decay: 0.98}}
//       # or: policy: {cascade: {small: wp-1m, large: wp-11m, k: 8, min_mean_logprob: -2.5,
//       #                        min_margin: 0.1, mode: stream|full}}
//
// Plain values; the loader is a pure function of the text (thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cache/cache_service.h"
#include "control/slo_targets.h"
#include "metrics/request_bucket.h"
#include "router/router.h"

namespace tarmac::config {

struct ModelEntry {
  std::string path;
  router::ModelInfo info;  // name (default: the file stem), tier, price, allowed risk / SLA
  std::optional<int32_t> threads;
  std::vector<int> cpus;  // empty: any
  std::optional<int32_t> max_concurrent, max_queue;
  std::optional<std::optional<double>> cache_responses;  // none: not by default; else the TTL (none: default)
};

struct TenantEntry {
  std::string name;
  std::string api_key_file;  // "" : none of its own
  std::string sla;           // "" : not set
  std::optional<metrics::Risk> risk;
  std::vector<std::string> scopes;
  std::string policy_version;             // "" : none
  std::optional<int64_t> session_max_blocks;
  // Its limits (server/tenant_limits.h); none: the flags' (--tenant-max-concurrent, ...).
  std::optional<int32_t> max_concurrent;   // generation requests in flight (0: no limit)
  std::optional<double> tokens_per_s;      // prompt + generated tokens per second (0: no limit)
  std::optional<double> token_burst;       // its bucket (0: 10 s of tokens_per_s)
};

struct ServeConfig {
  std::vector<ModelEntry> models;
  std::string api_key_file;
  std::vector<TenantEntry> tenants;
  control::SloTargets slos;  // empty: no section
  router::RouterConfig router;  // models' infos, routes, task rules, default task
  cache::CacheConfig cache;
  std::string cache_secret_file;  // "" : a random secret per start
  // Models and routes whose responses are cached by default, with their TTL (none: the
  // response cache's default).
  std::map<std::string, std::optional<double>> cached_responses;

  const TenantEntry* tenant(std::string_view name) const;
};

// `origin` names the text in errors (the file path).
Result<ServeConfig> ParseServeConfig(std::string_view yaml, const std::string& origin);
Result<ServeConfig> LoadServeConfig(const std::string& path);

}  // namespace tarmac::config
