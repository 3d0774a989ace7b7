#include "kv/kv_budget.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

namespace tarmac::kv {

Result<int64_t> AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return IoError("cannot read MemAvailable from /proc/meminfo");
}

Result<int32_t> BlocksForBytes(int64_t bytes, int64_t bytes_per_block) {
  if (bytes_per_block <= 0) return InvalidArgument("bytes per KV block must be > 0");
  const int64_t n = bytes / bytes_per_block;
  if (n < 1) {
    return InvalidArgument("a KV budget of {} bytes holds no block of {} bytes", bytes,
                           bytes_per_block);
  }
  return static_cast<int32_t>(std::min<int64_t>(n, std::numeric_limits<int32_t>::max()));
}

}  // namespace tarmac::kv
