// ApiKeyStore: API keys mapped to tenants, loaded from a file, looked up in constant time.
//
// File format: one key per line, "KEY TENANT" (whitespace-separated; the tenant defaults to
// "key<N>" when omitted); blank lines and lines starting with '#' are ignored. Keys are kept
// only as SHA-256 digests; Lookup hashes the presented key and compares it with EVERY stored
// digest in constant time (DigestEqual), so the time taken depends neither on how much of a key matched
// nor on which key matched (vLLM's CVE-2025-59425 was an early-exit comparison here).
//
// Immutable after Load; Lookup is thread-safe.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/digest.h"
#include "base/status.h"

namespace tarmac::server {

class ApiKeyStore {
 public:
  // tenant: every key of the file belongs to it (lines "KEY", or "KEY TENANT" naming it).
  static Result<ApiKeyStore> Load(const std::string& path, const std::string& tenant = "");
  static Result<ApiKeyStore> Parse(std::string_view text, const std::string& origin, const std::string& tenant = "");
  // Adds another store's keys. Errors: a key in both (whatever its tenants).
  Status Merge(const ApiKeyStore& other);

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  // The tenant of `key`, or nullopt.
  std::optional<std::string> Lookup(std::string_view key) const;

 private:
  struct Entry {
    Digest256 digest;
    std::string tenant;
  };
  std::vector<Entry> entries_;
};

// The key from an "Authorization: Bearer KEY" header value ("" when absent or malformed).
std::string_view BearerToken(std::string_view authorization);

}  // namespace tarmac::server
