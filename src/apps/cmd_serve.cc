// `tarmac serve`: the OpenAI-compatible HTTP server (src/server). Binds the port first (so
// /health answers 503 while models load), loads every model (-m, or the --config file's) with
// its own engine, sets the config's routes, then serves until SIGTERM/SIGINT, draining
// in-flight requests for up to --drain-timeout.
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "apps/commands.h"
#include "apps/model_loading.h"
#include "apps/engine_flags.h"
#include "base/thread_pool.h"
#include "config/serve_config.h"
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
  bool no_warmup = false;
  bool mmap = false;
  bool check_integrity = false;
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

// What the config holds that this build does not act on yet is refused, never ignored.
Status Unsupported(const config::ServeConfig& cfg, const std::string& path) {
  if (!cfg.slos.empty())
    return InvalidArgument("{}: slos: SLO targets are read by the SLO report and controller, which this build does not "
                           "have yet; remove the section", path);
  return Status::Ok();
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

int RunServe(const ServeArgs& a) {
  std::optional<config::ServeConfig> cfg;
  if (!a.config_file.empty()) {
    auto c = config::LoadServeConfig(a.config_file);
    if (!c.ok()) return Fail(c.status());
    if (Status st = Unsupported(*c, a.config_file); !st.ok()) return Fail(st);
    cfg = std::move(c).value();
  }
  const config::ServeConfig* config = cfg ? &*cfg : nullptr;
  auto models = ModelsToServe(a, config);
  if (!models.ok()) return Fail(models.status());
  server::ServerConfig sc = a.server;
  sc.metrics = std::make_shared<metrics::Registry>();
  auto keys = Keys(a, config);
  if (!keys.ok()) return Fail(keys.status());
  sc.keys = std::move(keys).value();
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
  std::thread io([&server] { server.Run(); });

  std::vector<SpecSetup> specs;  // draft models, outliving the engines like `loaded`
  specs.reserve(models->size());
  std::vector<LoadedModel> loaded;  // outlive the server's engines (joined below first)
  loaded.reserve(models->size());
  int rc = 0;
  for (const ModelToServe& mt : *models) {
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
    ec.metrics = sc.metrics;
    if (mt.threads) ec.threads = *mt.threads;
    ec.cpus = mt.cpus;
    auto sm = router::PoolModel::Create(mt.name, loaded.back().model.get(), loaded.back().tokenizer.get(), ec,
                                        a.check_integrity);
    if (!sm.ok()) {
      rc = Fail(Status(sm.status().code(), mt.path + ": " + sm.status().message()));
      break;
    }
    std::fprintf(stderr, "tarmac serve: model '%s': context %d, %d KV blocks (%.1f MiB)\n", mt.name.c_str(),
                 (*sm)->max_context, (*sm)->engine->config().kv.blocks, (*sm)->engine->kv_bytes() / 1048576.0);
    server.AddModel(std::move(sm).value(), mt.limits);
  }
  if (rc == 0 && config != nullptr && !config->router.routes.empty()) {
    std::vector<std::string> names;
    for (const router::RouteConfig& r : config->router.routes) names.push_back(r.name);
    if (Status st = server.SetRoutes(std::move(cfg->router)); !st.ok()) {
      rc = Fail(Status(st.code(), a.config_file + ": " + st.message()));
    } else {
      for (const std::string& n : names) std::fprintf(stderr, "tarmac serve: route '%s'\n", n.c_str());
    }
  }
  if (rc != 0) {
    server.Stop();
  } else {
    server.SetReady();
    std::fprintf(stderr, "tarmac serve: ready\n");
  }
  io.join();
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
                  "deployment file (YAML): models, tenants, routes such as 'auto' with rules, cascade or argmin "
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
  cmd->add_option("--request-timeout", a->server.request_timeout_s, "seconds a request may wait and run (408 beyond)")
      ->capture_default_str()->check(CLI::Range(0.001, 1e7));
  cmd->add_option("--drain-timeout", a->server.drain_timeout_s, "seconds in-flight requests may finish after SIGTERM")
      ->capture_default_str()->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--idle-timeout", a->server.idle_timeout_s, "seconds to read a request / keep an idle connection")
      ->capture_default_str()->check(CLI::Range(0.01, 1e7));
  AddEngineFlags(cmd, &a->engine);
  cmd->add_flag("--no-warmup", a->no_warmup,
                "skip the throwaway forward passes each model runs before 'ready' (they make the "
                "first request as fast as the next)");
  cmd->add_flag("--mmap", a->mmap, "use weights in place in the file mapping");
  cmd->add_flag("--check-integrity", a->check_integrity, "test aid: check KV integrity after every engine step (abort on error)");
  cmd->callback([a, run] { *run = [a] { return RunServe(*a); }; });
}

}  // namespace tarmac::apps
