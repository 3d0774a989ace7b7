// Logging: spdlog to stderr. Thread-safe. Call InitLogging once from main() (optional: a
// default stderr logger exists without it).
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

namespace tarmac {

// level: trace|debug|info|warn|error|off. Returns false for an unknown level name.
bool InitLogging(std::string_view level);

}  // namespace tarmac

#define TLOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define TLOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define TLOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define TLOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
