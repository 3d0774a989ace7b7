// The `cache:` section of the serve config and the `cache_responses` entry of models and
// routes (see serve_config.h for the file's shape).
#pragma once

#include <optional>
#include <string>

#include "cache/cache_service.h"
#include "config/yaml_node.h"

namespace tarmac::config {

// cache: {backend, url, secret_file, response: {...}, retrieval: {...}, tool: {...},
//         session: {..., max_blocks}}. Errors name the entry.
Status ParseCacheSection(const At& a, cache::CacheConfig* out, std::string* secret_file);

// cache_responses: true (the response cache's default TTL), false, or {ttl_s: N}. Returns
// nullopt for false; an optional TTL otherwise.
Result<std::optional<std::optional<double>>> ParseCacheResponses(const At& a);

}  // namespace tarmac::config
