// The element type of a KV cache: f16, or int8 with per-(block, head) scales (kv_cache.h).
// Its own header so configuration types can name it without the cache's kernel headers.
#pragma once

namespace tarmac::model {

enum class KvDtype { kF16, kInt8 };
const char* KvDtypeName(KvDtype d);  // "f16", "int8"

}  // namespace tarmac::model
