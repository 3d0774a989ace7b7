// `tarmac bench offline`: requests through an in-process engine (no HTTP).
#pragma once

#include "apps/commands.h"

namespace tarmac::apps {

// Adds `offline` under the `bench` subcommand.
void RegisterBenchOffline(CLI::App* bench, RunFn* run);

}  // namespace tarmac::apps
