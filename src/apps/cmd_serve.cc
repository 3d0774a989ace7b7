// `tarmac serve`: the OpenAI-compatible server. Not built yet: the command parses its flags,
// says what it would serve, and exits non-zero so no one mistakes it for a running server.
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"

namespace tarmac::apps {

void RegisterServe(CLI::App& app, RunFn* run) {
  auto* cmd = app.add_subcommand("serve", "serve models over an OpenAI-compatible HTTP API");
  auto models = std::make_shared<std::vector<std::string>>();
  auto host = std::make_shared<std::string>("127.0.0.1");
  auto port = std::make_shared<int>(8080);
  cmd->add_option("-m,--model", *models, "GGUF model file (repeatable)")->required();
  cmd->add_option("--host", *host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", *port, "port to listen on")->capture_default_str()
      ->check(CLI::Range(1, 65535));
  cmd->callback([=] {
    *run = [=] {
      std::fprintf(stderr,
                   "tarmac serve: would serve %s at http://%s:%d, but the HTTP server is not "
                   "built yet (see the open issues). Try `tarmac gguf inspect %s`.\n",
                   models->front().c_str(), host->c_str(), *port, models->front().c_str());
      return 3;
    };
  });
}

}  // namespace tarmac::apps
