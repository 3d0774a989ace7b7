// `tarmac gguf ...`: inspect, quantize, make-random. Placeholder until implemented.
#include "apps/commands.h"

namespace tarmac::apps {

void RegisterGguf(CLI::App& app, RunFn* run) {
  auto* cmd = app.add_subcommand("gguf", "inspect, quantize and create GGUF files");
  cmd->require_subcommand(1);
}

}  // namespace tarmac::apps
