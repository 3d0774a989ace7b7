// `tarmac serve`: the OpenAI-compatible HTTP server (src/server). Binds the port first (so
// /health answers 503 while models load), loads every -m model with its own engine, then
// serves until SIGTERM/SIGINT, draining in-flight requests for up to --drain-timeout.
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "apps/commands.h"
#include "apps/control_flags.h"
#include "apps/model_loading.h"
#include "apps/engine_flags.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "control/controller.h"
#include "control/slo_tracker.h"
#include "metrics/registry.h"
#include "router/pool_model.h"
#include "server/http_server.h"

namespace tarmac::apps {
namespace {

struct ServeArgs {
  std::vector<std::string> models;
  std::string api_key_file;
  server::ServerConfig server;  // the flags write into it: its defaults are the flags'
  EngineFlags engine;
  ControlFlags control;
  bool no_warmup = false;
  bool mmap = false;
  bool check_integrity = false;
};

int RunServe(const ServeArgs& a) {
  server::ServerConfig sc = a.server;
  sc.metrics = std::make_shared<metrics::Registry>();
  if (!a.api_key_file.empty()) {
    auto keys = server::ApiKeyStore::Load(a.api_key_file);
    if (!keys.ok()) {
      std::fprintf(stderr, "tarmac serve: --api-key-file: %s\n", keys.status().message().c_str());
      return 2;
    }
    sc.keys = std::move(keys).value();
  }
  auto targets = SloTargetsFrom(a.control);
  if (!targets.ok()) {
    std::fprintf(stderr, "tarmac serve: %s\n", targets.status().message().c_str());
    return 2;
  }
  if (Status st = a.control.config.Validate(); !st.ok()) {
    std::fprintf(stderr, "tarmac serve: %s\n", st.message().c_str());
    return 2;
  }
  // The SLO bookkeeping always runs (the report's attainment); the controller only when on.
  sc.slo_tracker = std::make_shared<control::SloTracker>(sc.metrics, std::move(targets).value(), 60.0,
                                                         a.control.config.window_s, NowSeconds());
  if (a.control.controller == "on")
    sc.controller = std::make_shared<control::Controller>(a.control.config, sc.slo_tracker, sc.metrics);
  std::vector<std::string> names;
  for (const std::string& path : a.models) {
    std::string name = std::filesystem::path(path).stem().string();
    for (const std::string& n : names) {
      if (n == name) {
        std::fprintf(stderr, "tarmac serve: two models are named '%s' (names are file stems)\n", name.c_str());
        return 2;
      }
    }
    names.push_back(name);
  }
  // One descriptor per connection: raise the soft limit to the hard one (often 1024 -> 1M).
  if (rlimit rl{}; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  auto srv = server::Server::Create(sc);
  if (!srv.ok()) {
    std::fprintf(stderr, "tarmac serve: %s\n", srv.status().message().c_str());
    return srv.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  server::Server& server = **srv;
  std::fprintf(stderr, "tarmac serve: listening on http://%s:%d (loading %zu model(s))\n", sc.host.c_str(),
               server.port(), a.models.size());
  std::thread io([&server] { server.Run(); });

  std::vector<SpecSetup> specs;  // draft models, outliving the engines like `loaded`
  specs.reserve(a.models.size());
  std::vector<LoadedModel> loaded;  // outlive the server's engines (joined below first)
  loaded.reserve(a.models.size());
  int rc = 0;
  for (size_t i = 0; i < a.models.size(); ++i) {
    auto lm = LoadModelAndTokenizer(a.models[i], /*quiet=*/false, a.mmap);
    if (!lm.ok()) {
      std::fprintf(stderr, "tarmac serve: %s\n", lm.status().message().c_str());
      rc = 2;
      break;
    }
    loaded.push_back(std::move(lm).value());
    auto spec = LoadSpec(a.engine.spec, a.models[i]);
    if (!spec.ok()) {
      std::fprintf(stderr, "tarmac serve: %s: %s\n", a.models[i].c_str(), spec.status().message().c_str());
      rc = 2;
      break;
    }
    specs.push_back(std::move(spec).value());
    engine::EngineConfig ec = ToEngineConfig(a.engine, specs.back());
    ec.warmup = !a.no_warmup;
    ec.metrics = sc.metrics;
    ec.on_request_finished = sc.slo_tracker->HookFor(names[i]);
    auto sm = router::PoolModel::Create(names[i], loaded.back().model.get(), loaded.back().tokenizer.get(), ec,
                                        a.check_integrity);
    if (!sm.ok()) {
      std::fprintf(stderr, "tarmac serve: %s: %s\n", a.models[i].c_str(), sm.status().message().c_str());
      rc = 2;
      break;
    }
    std::fprintf(stderr, "tarmac serve: model '%s': context %d, %d KV blocks (%.1f MiB)\n", names[i].c_str(),
                 (*sm)->max_context, (*sm)->engine->config().kv.blocks, (*sm)->engine->kv_bytes() / 1048576.0);
    if (sc.controller) sc.controller->AddModel(names[i], (*sm)->engine.get());
    server.AddModel(std::move(sm).value());
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
  srv->reset();  // engines stop before the models they borrow are freed
  return rc;
}

}  // namespace

void RegisterServe(CLI::App& app, RunFn* run) {
  auto* cmd = app.add_subcommand("serve", "serve models over an OpenAI-compatible HTTP API");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("-m,--model", a->models, "GGUF model file (repeatable; the request's 'model' is the file stem)")
      ->required()->check(CLI::ExistingFile);
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
  AddControlFlags(cmd, &a->control);
  cmd->add_flag("--no-warmup", a->no_warmup,
                "skip the throwaway forward passes each model runs before 'ready' (they make the "
                "first request as fast as the next)");
  cmd->add_flag("--mmap", a->mmap, "use weights in place in the file mapping");
  cmd->add_flag("--check-integrity", a->check_integrity, "test aid: check KV integrity after every engine step (abort on error)");
  cmd->callback([a, run] { *run = [a] { return RunServe(*a); }; });
}

}  // namespace tarmac::apps
