#include "server/auth.h"

#include <fstream>
#include <sstream>

#include "base/digest.h"

namespace tarmac::server {

Result<ApiKeyStore> ApiKeyStore::Load(const std::string& path, const std::string& tenant) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("{}: cannot read the API key file", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return Parse(ss.str(), path, tenant);
}

Status ApiKeyStore::Merge(const ApiKeyStore& other) {
  for (const Entry& e : other.entries_) {
    for (const Entry& mine : entries_)
      if (DigestEqual(mine.digest, e.digest))
        return InvalidArgument("an API key of tenant '{}' is also a key of tenant '{}'", e.tenant, mine.tenant);
    entries_.push_back(e);
  }
  return Status::Ok();
}

Result<ApiKeyStore> ApiKeyStore::Parse(std::string_view text, const std::string& origin, const std::string& only) {
  ApiKeyStore store;
  std::istringstream in{std::string(text)};
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream ls(line);
    std::string key, tenant, extra;
    if (!(ls >> key) || key[0] == '#') continue;
    ls >> tenant;
    if (ls >> extra) return InvalidArgument("{} line {}: expected 'KEY [TENANT]', found more fields", origin, lineno);
    if (key.size() < 8) return InvalidArgument("{} line {}: API keys must be at least 8 characters", origin, lineno);
    if (!only.empty() && !tenant.empty() && tenant != only)
      return InvalidArgument("{} line {}: a key of tenant '{}' names tenant '{}'", origin, lineno, only, tenant);
    if (tenant.empty()) tenant = only.empty() ? "key" + std::to_string(store.entries_.size() + 1) : only;
    store.entries_.push_back({Sha256(key), tenant});
  }
  if (store.entries_.empty()) return InvalidArgument("{}: no API keys found", origin);
  return store;
}

std::optional<std::string> ApiKeyStore::Lookup(std::string_view key) const {
  const auto d = Sha256(key);
  const Entry* found = nullptr;
  for (const Entry& e : entries_) {
    // No early exit: every entry is compared whatever matched before.
    const bool eq = DigestEqual(d, e.digest);
    if (eq && found == nullptr) found = &e;
  }
  if (found == nullptr || key.empty()) return std::nullopt;
  return found->tenant;
}

std::string_view BearerToken(std::string_view v) {
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  if (v.size() < 7) return {};
  std::string scheme(v.substr(0, 7));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer ") return {};
  v.remove_prefix(7);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}

}  // namespace tarmac::server
