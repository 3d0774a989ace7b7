// `tarmac bench serve`: load generator against a running OpenAI-compatible server.
#pragma once

#include "apps/commands.h"

namespace tarmac::apps {

// Adds `serve` under the `bench` subcommand.
void RegisterBenchServe(CLI::App* bench, RunFn* run);

}  // namespace tarmac::apps
