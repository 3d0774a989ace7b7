// libFuzzer target for the deployment file loader (config/serve_config.h): the input is the
// YAML text of `tarmac serve --config`. Any input must load or fail with an InvalidArgument
// that names the origin; nothing may crash, hang, leak or throw (yaml-cpp's exceptions
// included). Run: scripts/fuzz.sh serve_config SECONDS.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "config/serve_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  try {
    auto c = tarmac::config::ParseServeConfig(yaml, "fuzz.yaml");
    if (!c.ok()) {
      if (c.status().code() != tarmac::StatusCode::kInvalidArgument ||
          c.status().message().find("fuzz.yaml") == std::string::npos) {
        std::fprintf(stderr, "config fuzz: unexpected status %s\n", c.status().ToString().c_str());
        std::abort();
      }
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "config fuzz: exception escaped the loader: %s\n", ex.what());
    std::abort();
  }
  return 0;
}
