// Subcommand registration for the tarmac binary. Each Register* adds its subcommand(s) to
// `app` and sets *run to the function main() runs when that subcommand was chosen; the
// function returns the process exit code (0 ok, 1 runtime failure, 2 bad usage/input).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace tarmac::apps {

using RunFn = std::function<int()>;

void RegisterServe(CLI::App& app, RunFn* run);
void RegisterGguf(CLI::App& app, RunFn* run);
void RegisterGenerate(CLI::App& app, RunFn* run);  // generate, tokenize, perplexity
void RegisterBench(CLI::App& app, RunFn* run);
void RegisterTemplate(CLI::App& app, RunFn* run);  // template render
void RegisterReport(CLI::App& app, RunFn* run);    // report --url
void RegisterPlan(CLI::App& app, RunFn* run);      // plan -m
void RegisterInfo(CLI::App& app, RunFn* run);      // info: CPU features, dispatch table

}  // namespace tarmac::apps
