// Turning a KV memory budget into a block count.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace tarmac::kv {

// MemAvailable from /proc/meminfo in bytes, or an error when it cannot be read.
Result<int64_t> AvailableMemoryBytes();

// Whole blocks that fit in `bytes`. Errors when not even one fits or bytes_per_block <= 0.
Result<int32_t> BlocksForBytes(int64_t bytes, int64_t bytes_per_block);

}  // namespace tarmac::kv
