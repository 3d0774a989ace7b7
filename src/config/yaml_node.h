// Reading a YAML document with errors that name where: At is a node and its path
// (`routes[0].policy.cascade.k`), and the readers below check a node's kind and range and say
// what is wrong in the file's terms. Used by the config loaders (serve_config, cache_section).
//
// Plain values; the readers are pure functions (thread-safe over distinct nodes).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "metrics/request_bucket.h"

namespace tarmac::config {

// A YAML node and where it is, for errors.
struct At {
  YAML::Node node;
  std::string path;
  const std::string* origin;
  const std::set<std::string>* models = nullptr;  // the configured model names, once parsed

  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) const {
    return InvalidField(path, "{}: {}: {}", *origin, path.empty() ? "(top level)" : path,
                        fmt::format(f, std::forward<Args>(args)...));
  }
  // Const access: reading a missing key must not add it.
  At Key(const std::string& k) const {
    const YAML::Node& n = node;
    return {n[k], path.empty() ? k : path + "." + k, origin, models};
  }
  At Index(size_t i) const {
    const YAML::Node& n = node;
    return {n[i], fmt::format("{}[{}]", path, i), origin, models};
  }
  bool has(const std::string& k) const {
    const YAML::Node& n = node;
    return n.IsMap() && n[k];
  }
};

const char* KindName(const YAML::Node& n);
// A map whose keys are all in `known` (an unknown key is an error listing the known ones).
Status ExpectMap(const At& a, const std::set<std::string>& known);
// A non-empty scalar.
Result<std::string> String(const At& a);
// A name (model, tier, task, tenant): letters, digits, '-', '_', '.'.
Result<std::string> Name(const At& a);
// A reference to a configured model (At::models): the error names the exact entry.
Result<std::string> ModelName(const At& a);
Result<double> Number(const At& a);
Result<int64_t> Integer(const At& a, int64_t lo, int64_t hi);
Result<metrics::Risk> RiskOf(const At& a);
// A name or a non-empty list of names, each checked by `name` (Name or ModelName).
Result<std::vector<std::string>> Names(const At& a, Result<std::string> (*name)(const At&) = Name);
// true / false.
Result<bool> Bool(const At& a);

}  // namespace tarmac::config
