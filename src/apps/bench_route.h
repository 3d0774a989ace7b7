// `tarmac bench route`: the cascade evaluated as RouteLLM evaluates routers (cmd_bench_route.cc)
// and the online argmin under a load change (cmd_bench_route_online.cc).
#pragma once

#include <cstdint>
#include <string>

#include "apps/commands.h"

namespace tarmac::apps {

struct RouteArgs {
  std::string small, large, text;
  int prompts = 500;
  int prompt_len = 128;
  int output_len = 32;
  int k = 8;
  int threads = 1;
  uint64_t seed = 1;
  int bootstrap = 1000;
  int ttft_samples = 40;
  bool pin = false;     // small model on CPU 0, large on CPU 1
  int online = 0;       // > 0: the online argmin over this many requests instead
  bool json = false;
};

int RunBenchRoute(const RouteArgs& a);
int RunBenchRouteOnline(const RouteArgs& a);

// Adds `route` under the `bench` subcommand.
void RegisterBenchRoute(CLI::App* bench, RunFn* run);

}  // namespace tarmac::apps
