#include "config/yaml_node.h"

#include <cmath>
#include <string>

namespace tarmac::config {

const char* KindName(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "undefined";
  }
}

Status ExpectMap(const At& a, const std::set<std::string>& known) {
  if (!a.node.IsMap()) return a.Error("expected a map, got {}", KindName(a.node));
  for (const auto& kv : a.node) {
    const std::string k = kv.first.as<std::string>("");
    if (!known.count(k)) {
      std::string list;
      for (const std::string& s : known) list += (list.empty() ? "" : ", ") + s;
      return a.Key(k).Error("unknown key (expected one of: {})", list);
    }
  }
  return Status::Ok();
}

Result<std::string> String(const At& a) {
  if (!a.node.IsScalar()) return a.Error("expected a string, got {}", KindName(a.node));
  std::string s = a.node.Scalar();
  if (s.empty()) return a.Error("must not be empty");
  return s;
}

// A name (model, tier, task, tenant): letters, digits, '-', '_', '.'.
Result<std::string> Name(const At& a) {
  TARMAC_ASSIGN_OR_RETURN(std::string s, String(a));
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return a.Error("'{}' may hold only letters, digits, '-', '_' and '.'", s);
  }
  return s;
}

// A reference to a configured model: the error names the exact entry.
Result<std::string> ModelName(const At& a) {
  TARMAC_ASSIGN_OR_RETURN(std::string s, Name(a));
  if (a.models != nullptr && !a.models->count(s)) return a.Error("no model named '{}'", s);
  return s;
}

Result<double> Number(const At& a) {
  if (!a.node.IsScalar()) return a.Error("expected a number, got {}", KindName(a.node));
  const std::string& s = a.node.Scalar();
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != s.size() || !std::isfinite(v)) return a.Error("expected a number, got '{}'", s);
  return v;
}

Result<int64_t> Integer(const At& a, int64_t lo, int64_t hi) {
  if (!a.node.IsScalar()) return a.Error("expected an integer, got {}", KindName(a.node));
  const std::string& s = a.node.Scalar();
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != s.size()) return a.Error("expected an integer, got '{}'", s);
  if (v < lo || v > hi) return a.Error("must be in [{}, {}], got {}", lo, hi, v);
  return static_cast<int64_t>(v);
}

Result<metrics::Risk> RiskOf(const At& a) {
  TARMAC_ASSIGN_OR_RETURN(std::string s, String(a));
  auto r = metrics::ParseRisk(s);
  if (!r.ok()) return a.Error("risk must be 'low' or 'high', got '{}'", s);
  return *r;
}

// A name or a list of names.
// `name` checks each entry (Name or ModelName).
Result<std::vector<std::string>> Names(const At& a, Result<std::string> (*name)(const At&)) {
  std::vector<std::string> out;
  if (a.node.IsScalar()) {
    TARMAC_ASSIGN_OR_RETURN(std::string s, name(a));
    out.push_back(std::move(s));
    return out;
  }
  if (!a.node.IsSequence() || a.node.size() == 0) return a.Error("expected a name or a non-empty list of names");
  for (size_t i = 0; i < a.node.size(); ++i) {
    TARMAC_ASSIGN_OR_RETURN(std::string s, name(a.Index(i)));
    out.push_back(std::move(s));
  }
  return out;
}

Result<bool> Bool(const At& a) {
  if (a.node.IsScalar()) {
    const std::string& s = a.node.Scalar();
    if (s == "true") return true;
    if (s == "false") return false;
  }
  return a.Error("expected true or false");
}

}  // namespace tarmac::config
