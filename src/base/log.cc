#include "base/log.h"

#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace tarmac {

bool InitLogging(std::string_view level) {
  auto lvl = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (lvl == spdlog::level::off && level != "off") return false;
  auto logger = spdlog::stderr_color_mt("tarmac");
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  return true;
}

}  // namespace tarmac
