// tarmac: the single binary. Subcommands live in cmd_*.cc files.
#include <cstdio>

#include "apps/commands.h"
#include "base/log.h"
#include "kernels/cpu_features.h"

int main(int argc, char** argv) {
  CLI::App app{"tarmac: an LLM inference server for GGUF models"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  app.set_version_flag("--version", "tarmac 0.1.0");

  tarmac::apps::RunFn run;
  tarmac::apps::RegisterServe(app, &run);
  tarmac::apps::RegisterGguf(app, &run);
  tarmac::apps::RegisterGenerate(app, &run);
  tarmac::apps::RegisterBench(app, &run);
  tarmac::apps::RegisterTemplate(app, &run);
  tarmac::apps::RegisterReport(app, &run);
  tarmac::apps::RegisterPlan(app, &run);
  tarmac::apps::RegisterInfo(app, &run);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!tarmac::InitLogging(log_level)) {
    std::fprintf(stderr, "tarmac: unknown --log-level '%s'\n", log_level.c_str());
    return 2;
  }
  // The kernels' ISA override (TARMAC_ISA) applies from here on; a bad value is bad usage.
  if (const auto err = tarmac::kernels::InitIsaFromEnvironment()) {
    std::fprintf(stderr, "tarmac: %s\n", err->c_str());
    return 2;
  }
  if (!run) {
    std::fprintf(stderr, "tarmac: no command chosen (see --help)\n");
    return 2;
  }
  return run();
}
