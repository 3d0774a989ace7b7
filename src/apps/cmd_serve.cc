// `tarmac serve`: the OpenAI-compatible HTTP server (src/server). Binds the port first (so
// /health answers 503 while models load), loads every model (-m, or the --config file's) with
// its own engine, sets the config's routes, then serves until SIGTERM/SIGINT, draining
// in-flight requests for up to --drain-timeout.
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "apps/commands.h"
#include "apps/control_flags.h"
#include "apps/model_loading.h"
#include "apps/engine_flags.h"
#include "base/clock.h"
#include "apps/serve_scale_out.h"
#include "base/thread_pool.h"
#include "config/serve_config.h"
#include "control/controller.h"
#include "control/slo_tracker.h"
#include "grammar/tool_call_format.h"
#include "metrics/registry.h"
#include "router/pool_model.h"
#include "server/http_server.h"

namespace tarmac::apps {
namespace {

struct ServeArgs {
  std::vector<std::string> models;
  std::string config_file;
  std::string api_key_file;
  server::ServerConfig server;  // the flags write into it: its defaults are the flags'
  EngineFlags engine;
  ControlFlags control;
  ScaleOutFlags scale_out;
  bool no_warmup = false;
  bool mmap = false;
  bool check_integrity = false;
  bool debug_fault_injection = false;
  bool no_parse_special = false;
  std::string tool_call_parser = "auto";  // auto: each model's, from its chat template
};

// One model to serve: its file, name and the config's overrides.
struct ModelToServe {
  std::string path, name;
  std::optional<int32_t> threads;
  std::vector<int> cpus;
  std::optional<router::AdmissionLimits> limits;
};

// The models from -m (names are file stems) or from the config; errors name the problem.
Result<std::vector<ModelToServe>> ModelsToServe(const ServeArgs& a, const config::ServeConfig* cfg) {
  std::vector<ModelToServe> out;
  if (cfg != nullptr) {
    if (!a.models.empty()) return InvalidArgument("give the models in --config or with -m, not both");
    for (const config::ModelEntry& m : cfg->models) {
      ModelToServe t{m.path, m.info.name, m.threads, m.cpus, std::nullopt};
      if (m.max_concurrent || m.max_queue) {
        router::AdmissionLimits l = a.server.admission;
        if (m.max_concurrent) l.max_concurrent = *m.max_concurrent;
        if (m.max_queue) l.max_queue = *m.max_queue;
        t.limits = l;
      }
      out.push_back(std::move(t));
    }
    return out;
  }
  if (a.models.empty()) return InvalidArgument("give at least one model with -m FILE, or a --config file");
  for (const std::string& path : a.models) {
    std::string name = std::filesystem::path(path).stem().string();
    for (const ModelToServe& m : out)
      if (m.name == name) return InvalidArgument("two models are named '{}' (names are file stems)", name);
    out.push_back({path, name, std::nullopt, {}, std::nullopt});
  }
  return out;
}

// Each model's CPUs: the config's where any model names some (the others unpinned), else the
// --pin-threads placement of all the models' threads together.
std::vector<std::vector<int>> ModelCpus(const EngineFlags& f, const std::vector<ModelToServe>& models) {
  std::vector<std::vector<int>> out;
  std::vector<int> threads;
  bool configured = false;
  for (const ModelToServe& m : models) {
    out.push_back(m.cpus);
    threads.push_back(m.threads.value_or(f.threads));
    configured = configured || !m.cpus.empty();
  }
  return configured ? out : EngineCpus(f.pin_threads, threads);
}

// "2 threads on CPUs 0, 1 (one each)" / "2 threads, unpinned", for the start-up line.
std::string DescribePlacement(int threads, const std::vector<int>& cpus) {
  if (cpus.empty()) return fmt::format("{} thread(s), unpinned", threads);
  return fmt::format("{} thread(s) on CPUs {}{}", threads, fmt::join(cpus, ","),
                     static_cast<int>(cpus.size()) >= threads ? " (one each)" : " (shared)");
}

// API keys from --api-key-file, the config's api_key_file and each tenant's own file.
Result<std::optional<server::ApiKeyStore>> Keys(const ServeArgs& a, const config::ServeConfig* cfg) {
  std::optional<server::ApiKeyStore> keys;
  auto add = [&](const std::string& path, const std::string& tenant) -> Status {
    auto k = server::ApiKeyStore::Load(path, tenant);
    if (!k.ok()) return k.status();
    if (!keys) {
      keys = std::move(k).value();
      return Status::Ok();
    }
    return keys->Merge(*k);
  };
  if (cfg != nullptr && !cfg->api_key_file.empty() && !a.api_key_file.empty())
    return InvalidArgument("give the API key file in --config (api_key_file) or with --api-key-file, not both");
  if (!a.api_key_file.empty()) TARMAC_RETURN_IF_ERROR(add(a.api_key_file, ""));
  if (cfg != nullptr) {
    if (!cfg->api_key_file.empty()) TARMAC_RETURN_IF_ERROR(add(cfg->api_key_file, ""));
    for (const config::TenantEntry& t : cfg->tenants)
      if (!t.api_key_file.empty()) TARMAC_RETURN_IF_ERROR(add(t.api_key_file, t.name));
  }
  return keys;
}

// The SLO targets: from --slo or from the config's slos, not both (none: no tier has targets).
Result<control::SloTargets> Targets(const ServeArgs& a, const config::ServeConfig* cfg) {
  if (cfg != nullptr && !cfg->slos.empty()) {
    if (!a.control.slo.empty()) return InvalidArgument("give the SLO targets in --config (slos) or with --slo, not both");
    return cfg->slos;
  }
  return SloTargetsFrom(a.control);
}

// The namespace secret: the file's bytes (a trailing newline dropped), at least 16 of them.
Result<std::string> ReadSecret(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cache.secret_file {}: cannot read the file", path);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.size() < 16) return InvalidArgument("cache.secret_file {}: holds {} bytes; a secret needs at least 16", path, s.size());
  return s;
}

int Fail(const Status& st) {
  std::fprintf(stderr, "tarmac serve: %s\n", st.message().c_str());
  return st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kNotFound ? 2 : 1;
}

// The environment variable that must be set to 1 beside --debug-fault-injection: a stray flag
// in a production unit file fails to start instead of letting requests break their engines.
constexpr const char* kFaultInjectionEnv = "TARMAC_ALLOW_DEBUG_FAULT_INJECTION";

// Per-tenant limits: the flags' for every tenant, the config's tenants' own over them.
Status TenantLimits(const ServeArgs& a, const config::ServeConfig* cfg, server::ServerConfig* sc) {
  TARMAC_RETURN_IF_ERROR(sc->tenant_limit.Validate("--tenant-max-concurrent/--tenant-token-rate/--tenant-token-burst"));
  if (cfg == nullptr) return Status::Ok();
  for (size_t i = 0; i < cfg->tenants.size(); ++i) {
    const config::TenantEntry& t = cfg->tenants[i];
    if (!t.max_concurrent && !t.tokens_per_s && !t.token_burst) continue;
    server::TenantLimit l = sc->tenant_limit;
    if (t.max_concurrent) l.max_concurrent = *t.max_concurrent;
    if (t.tokens_per_s) l.tokens_per_s = *t.tokens_per_s, l.token_burst = 0;
    if (t.token_burst) l.token_burst = *t.token_burst;
    TARMAC_RETURN_IF_ERROR(l.Validate(fmt::format("{}: tenants[{}] ('{}')", a.config_file, i, t.name)));
    sc->tenant_limits[t.name] = l;
  }
  return Status::Ok();
}

int RunServe(const ServeArgs& a) {
  if (a.debug_fault_injection) {
    const char* allow = std::getenv(kFaultInjectionEnv);
    if (allow == nullptr || std::string(allow) != "1")
      return Fail(InvalidArgument("--debug-fault-injection is a test aid: it needs {}=1 in the environment too",
                                  kFaultInjectionEnv));
    std::fprintf(stderr, "tarmac serve: WARNING: debug fault injection is on (x-tarmac-debug-fault); never in production\n");
  }
  std::optional<config::ServeConfig> cfg;
  if (!a.config_file.empty()) {
    auto c = config::LoadServeConfig(a.config_file);
    if (!c.ok()) return Fail(c.status());
    cfg = std::move(c).value();
  }
  const config::ServeConfig* config = cfg ? &*cfg : nullptr;
  auto models = ModelsToServe(a, config);
  if (!models.ok()) return Fail(models.status());
  server::ServerConfig sc = a.server;
  sc.metrics = std::make_shared<metrics::Registry>();
  sc.debug_fault_injection = a.debug_fault_injection;
  if (Status st = TenantLimits(a, config, &sc); !st.ok()) return Fail(st);
  sc.parse_special = !a.no_parse_special;
  std::optional<grammar::ToolCallFormat> tool_format;
  if (a.tool_call_parser != "auto") {
    auto f = grammar::ParseToolCallFormat(a.tool_call_parser);
    if (!f.ok()) return Fail(Status(StatusCode::kInvalidArgument, "--tool-call-parser: " + f.status().message()));
    tool_format = *f;
  }
  auto keys = Keys(a, config);
  if (!keys.ok()) return Fail(keys.status());
  sc.keys = std::move(keys).value();
  auto targets = Targets(a, config);
  if (!targets.ok()) return Fail(targets.status());
  if (Status st = a.control.config.Validate(); !st.ok()) return Fail(st);
  // The SLO bookkeeping always runs (the report's attainment); the controller only when on.
  sc.slo_tracker = std::make_shared<control::SloTracker>(sc.metrics, std::move(targets).value(), 60.0,
                                                         a.control.config.window_s, NowSeconds());
  if (a.control.controller == "on")
    sc.controller = std::make_shared<control::Controller>(a.control.config, sc.slo_tracker, sc.metrics);
  if (config != nullptr) {
    for (const config::TenantEntry& t : config->tenants)
      sc.tenants[t.name] = {t.sla, t.risk, t.scopes, t.policy_version, t.session_max_blocks};
    sc.cache = config->cache;
    sc.cached_responses = config->cached_responses;
    if (!config->cache_secret_file.empty()) {
      auto secret = ReadSecret(config->cache_secret_file);
      if (!secret.ok()) return Fail(secret.status());
      sc.cache.secret = std::move(secret).value();
    }
  }
  std::vector<std::string> names;
  for (const ModelToServe& mt : *models) names.push_back(mt.name);
  auto vllm_model = VllmMetricsModel(a.scale_out, names);
  if (!vllm_model.ok()) return Fail(vllm_model.status());
  sc.vllm_metrics_model = *vllm_model;
  if (auto t = KvEventTopic(a.scale_out.kv_events_topic, sc.host, sc.port, "m"); !t.ok()) return Fail(t.status());
  // Before the models: their engines tell it when events are queued.
  auto publisher = StartKvEvents(a.scale_out, sc.metrics);
  if (!publisher.ok()) return Fail(publisher.status());
  kvevents::Publisher* pub = publisher->get();
  // One descriptor per connection: raise the soft limit to the hard one (often 1024 -> 1M).
  if (rlimit rl{}; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  auto srv = server::Server::Create(sc);
  if (!srv.ok()) return Fail(srv.status());
  server::Server& server = **srv;
  std::fprintf(stderr, "tarmac serve: listening on http://%s:%d (loading %zu model(s))\n", sc.host.c_str(),
               server.port(), models->size());
  if (pub != nullptr) {
    std::fprintf(stderr, "tarmac serve: KV events on %s (%s)%s%s\n", pub->endpoint().c_str(),
                 a.scale_out.kv_events.empty() ? "connected" : "bound", pub->replay_endpoint().empty() ? "" : ", replay on ",
                 pub->replay_endpoint().c_str());
  }
  std::thread io([&server] { server.Run(); });

  std::vector<SpecSetup> specs;  // draft models, outliving the engines like `loaded`
  specs.reserve(models->size());
  std::vector<LoadedModel> loaded;  // outlive the server's engines (joined below first)
  loaded.reserve(models->size());
  const std::vector<std::vector<int>> cpus = ModelCpus(a.engine, *models);
  int rc = 0;
  for (size_t i = 0; i < models->size(); ++i) {
    const ModelToServe& mt = (*models)[i];
    auto lm = LoadModelAndTokenizer(mt.path, /*quiet=*/false, a.mmap, a.engine.max_context);
    if (!lm.ok()) {
      rc = Fail(lm.status());
      break;
    }
    loaded.push_back(std::move(lm).value());
    auto spec = LoadSpec(a.engine.spec, mt.path);
    if (!spec.ok()) {
      rc = Fail(Status(spec.status().code(), mt.path + ": " + spec.status().message()));
      break;
    }
    specs.push_back(std::move(spec).value());
    engine::EngineConfig ec = ToEngineConfig(a.engine, specs.back());
    ec.warmup = !a.no_warmup;
    ec.fault_injection = a.debug_fault_injection;
    ec.metrics = sc.metrics;
    ec.on_request_finished = sc.slo_tracker->HookFor(mt.name);
    if (mt.threads) ec.threads = *mt.threads;
    ec.cpus = cpus[i];
    if (pub != nullptr) {
      ec.event_capacity = 1 << 16;
      ec.on_events = [pub] { pub->Notify(); };
    }
    auto sm = router::PoolModel::Create(mt.name, loaded.back().model.get(), loaded.back().tokenizer.get(), ec,
                                        a.check_integrity);
    if (!sm.ok()) {
      rc = Fail(Status(sm.status().code(), mt.path + ": " + sm.status().message()));
      break;
    }
    if (tool_format) (*sm)->tool_format = *tool_format;
    std::fprintf(stderr, "tarmac serve: model '%s': context %d, %d KV blocks (%.1f MiB), tool calls: %s, %s\n", mt.name.c_str(),
                 (*sm)->max_context, (*sm)->engine->config().kv.blocks, (*sm)->engine->kv_bytes() / 1048576.0,
                 grammar::ToolCallFormatName((*sm)->tool_format), DescribePlacement(ec.threads, ec.cpus).c_str());
    if (sc.controller) sc.controller->AddModel(mt.name, (*sm)->engine.get());
    if (pub != nullptr) {
      engine::EngineClient* e = (*sm)->engine.get();
      pub->AddSource({KvEventTopic(a.scale_out.kv_events_topic, sc.host, server.port(), mt.name).value(),
                      e->config().sched.block_size, [e](size_t max) { return e->DrainEvents(max); }});
    }
    server.AddModel(std::move(sm).value(), mt.limits);
  }
  if (rc == 0 && config != nullptr && !config->router.routes.empty()) {
    std::vector<std::string> names;
    for (const router::RouteConfig& r : config->router.routes) names.push_back(r.name);
    if (Status st = server.SetRoutes(std::move(cfg->router)); !st.ok()) {
      rc = Fail(Status(st.code(), a.config_file + ": " + st.message()));
    } else {
      for (const std::string& n : names) std::fprintf(stderr, "tarmac serve: route '%s'\n", n.c_str());
      if (sc.controller) sc.controller->SetRouteDegrader(server.route_degrader());
    }
  }
  if (rc != 0) {
    server.Stop();
  } else {
    if (sc.controller) sc.controller->Start();
    server.SetReady();
    std::fprintf(stderr, "tarmac serve: ready%s\n", sc.controller ? " (degradation controller on)" : "");
  }
  io.join();
  if (sc.controller) sc.controller->Stop();  // it acts on the engines: before they go
  if (pub != nullptr) pub->Stop();  // while the engines it drains are still there
  srv->reset();  // engines stop before the models they borrow are freed
  return rc;
}

}  // namespace

void RegisterServe(CLI::App& app, RunFn* run) {
  auto* cmd = app.add_subcommand("serve", "serve models over an OpenAI-compatible HTTP API");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("-m,--model", a->models, "GGUF model file (repeatable; the request's 'model' is the file stem)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--config", a->config_file,
                  "deployment file (YAML): models, tenants, SLO targets (slos), routes such as 'auto' with rules, cascade or argmin "
                  "policies and a baseline (instead of -m)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--host", a->server.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", a->server.port, "port to listen on (0: any free port)")->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key-file", a->api_key_file, "file of 'KEY TENANT' lines; when set, every route but /health needs 'Authorization: Bearer KEY'")
      ->check(CLI::ExistingFile);
  cmd->add_option("--max-body-bytes", a->server.max_body_bytes, "largest request body (413 beyond)")->capture_default_str()
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 32));
  cmd->add_option("--max-concurrent", a->server.admission.max_concurrent, "generation requests in the engines at once")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-queue", a->server.admission.max_queue, "requests waiting for admission (429 beyond)")->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--max-queue-tokens", a->server.admission.max_queue_tokens, "prompt + max_tokens of waiting requests (429 beyond)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--rate-limit", a->server.rate_limit_rps, "generation requests per second per tenant (token bucket; 0: off)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--rate-limit-burst", a->server.rate_limit_burst, "token bucket size (0: max(1, --rate-limit))")
      ->capture_default_str()->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--tenant-max-concurrent", a->server.tenant_limit.max_concurrent,
                  "generation requests in flight per tenant (429 beyond; 0: no limit; a config tenant's max_concurrent overrides)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--tenant-token-rate", a->server.tenant_limit.tokens_per_s,
                  "prompt + generated tokens per second per tenant (token bucket, 429 while in debt; 0: no limit; a "
                  "config tenant's tokens_per_s overrides)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e12));
  cmd->add_option("--tenant-token-burst", a->server.tenant_limit.token_burst,
                  "the per-tenant token bucket's size (0: 10 s of --tenant-token-rate)")
      ->capture_default_str()->check(CLI::Range(0.0, 1e12));
  cmd->add_option("--request-timeout", a->server.request_timeout_s, "seconds from a request's arrival to its end: preparation, admission wait and run (408 beyond)")
      ->capture_default_str()->check(CLI::Range(0.001, 1e7));
  cmd->add_option("--drain-timeout", a->server.drain_timeout_s, "seconds in-flight requests may finish after SIGTERM")
      ->capture_default_str()->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--idle-timeout", a->server.idle_timeout_s, "seconds to read a request / keep an idle connection")
      ->capture_default_str()->check(CLI::Range(0.01, 1e7));
  cmd->add_option("--prepare-threads", a->server.prepare_threads,
                  "threads that prepare requests off the I/O thread (chat template, tokenizer, grammar compile)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--prepare-nice", a->server.prepare_nice,
                  "nice value of the prepare threads (0-19): background work that yields the CPU to the engine's threads")
      ->capture_default_str()->check(CLI::Range(0, 19));
  cmd->add_option("--prepare-queue", a->server.prepare_queue,
                  "requests that may wait for a prepare thread (503 beyond)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--cors-origin", a->server.cors_origins,
                  "let browsers on this origin call the API (repeatable; '*': any origin): CORS headers on responses, "
                  "preflight OPTIONS answered (off by default)");
  cmd->add_option("--json-max-whitespace", a->server.parse_defaults.json_max_whitespace,
                  "whitespace characters allowed between JSON tokens of constrained JSON outputs (json_object, "
                  "json_schema, tool arguments; 0: compact)")
      ->capture_default_str()->check(CLI::Range(0, 64));
  cmd->add_flag("--no-parse-special", a->no_parse_special,
                "completions prompts and /tokenize keep special-token text (\"<|eot_id|>\") as text unless a request "
                "sets parse_special (default: parsed, as vLLM and llama.cpp do)");
  cmd->add_option("--tool-call-parser", a->tool_call_parser,
                  "how models write tool calls: auto (each model's, detected from its chat template), hermes, "
                  "llama3_json, mistral, none")
      ->capture_default_str();
  AddEngineFlags(cmd, &a->engine);
  AddControlFlags(cmd, &a->control);
  AddScaleOutFlags(cmd, &a->scale_out);
  cmd->add_flag("--no-warmup", a->no_warmup,
                "skip the throwaway forward passes each model runs before 'ready' (they make the "
                "first request as fast as the next)");
  cmd->add_flag("--mmap", a->mmap, "use weights in place in the file mapping");
  cmd->add_flag("--debug-fault-injection", a->debug_fault_injection,
                std::string("test aid, never in production: requests may carry x-tarmac-debug-fault: "
                            "tokenize|detokenize|kernel|kv_alloc|check|engine to make their own processing fail "
                            "there; needs ") + kFaultInjectionEnv + "=1 in the environment");
  cmd->add_flag("--check-integrity", a->check_integrity, "test aid: check KV integrity after every engine step (abort on error)");
  cmd->callback([a, run] { *run = [a] { return RunServe(*a); }; });
}

}  // namespace tarmac::apps
