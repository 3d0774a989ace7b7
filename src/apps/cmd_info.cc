// `tarmac info`: this machine's CPU features, its ISA level and the kernel dispatch table
// (kernels/dispatch.h), at the active level or at one given with --isa.
#include <cstdio>
#include <memory>
#include <string>

#include "apps/commands.h"
#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"

namespace tarmac::apps {

void RegisterInfo(CLI::App& app, RunFn* run) {
  auto isa = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("info", "CPU features and the kernel dispatch table");
  cmd->add_option("--isa", *isa,
                  "print the table at this level (scalar, avx2, avx2-vnni, avx512, amx; "
                  "clamped to the CPU's) instead of the active one");
  cmd->callback([run, isa] {
    *run = [isa]() -> int {
      kernels::Isa level = kernels::ActiveIsa();
      if (!isa->empty()) {
        const auto parsed = kernels::ParseIsa(*isa);
        if (!parsed) {
          std::fprintf(stderr,
                       "tarmac info: --isa '%s' is not a level (scalar, avx2, avx2-vnni, "
                       "avx512, amx)\n",
                       isa->c_str());
          return 2;
        }
        level = *parsed;
      }
      std::printf("cpu: %s\n", kernels::DescribeCpu().c_str());
      std::printf("isa: native %s, active %s\n", kernels::IsaName(kernels::NativeIsa()),
                  kernels::IsaName(kernels::ActiveIsa()));
      std::printf("%s", kernels::DescribeDispatchTable(level).c_str());
      return 0;
    };
  });
}

}  // namespace tarmac::apps
