#include "apps/plan_workload.h"

#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace tarmac::apps {
namespace {

Status CheckKeys(const YAML::Node& n, const std::set<std::string>& allowed, const std::string& where,
                 const std::string& source) {
  if (!n.IsMap()) return InvalidField(where, "{}: {} must be a mapping", source, where.empty() ? "the document" : where);
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    if (allowed.count(key) == 0) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      const std::string path = where.empty() ? key : where + "." + key;
      return InvalidField(path, "{}: unknown key '{}' (known: {})", source, path, list);
    }
  }
  return Status::Ok();
}

template <class T>
Status Read(const YAML::Node& parent, const char* key, const std::string& where, const std::string& source, T* out) {
  const YAML::Node n = parent[key];
  if (!n) return Status::Ok();
  const std::string path = where.empty() ? key : where + "." + key;
  try {
    *out = n.as<T>();
  } catch (const YAML::Exception&) {
    return InvalidField(path, "{}: {} = '{}' is not a valid {}", source, path, n.Scalar(),
                        std::is_same_v<T, std::string> ? "string" : "number");
  }
  return Status::Ok();
}

}  // namespace

Result<control::PlanWorkload> ParsePlanWorkload(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return InvalidField("workload", "{}: not valid YAML: {}", source, e.what());
  }
  control::PlanWorkload w;
  TARMAC_RETURN_IF_ERROR(CheckKeys(root, {"rate", "concurrency", "requests", "target_rate", "seed", "classes"}, "", source));
  TARMAC_RETURN_IF_ERROR(Read(root, "rate", "", source, &w.rate));
  TARMAC_RETURN_IF_ERROR(Read(root, "concurrency", "", source, &w.concurrency));
  TARMAC_RETURN_IF_ERROR(Read(root, "requests", "", source, &w.requests));
  TARMAC_RETURN_IF_ERROR(Read(root, "target_rate", "", source, &w.target_rate));
  TARMAC_RETURN_IF_ERROR(Read(root, "seed", "", source, &w.seed));
  if (const YAML::Node classes = root["classes"]) {
    if (!classes.IsSequence()) return InvalidField("classes", "{}: classes must be a list", source);
    w.classes.clear();
    for (size_t i = 0; i < classes.size(); ++i) {
      const std::string where = "classes[" + std::to_string(i) + "]";
      const YAML::Node c = classes[i];
      TARMAC_RETURN_IF_ERROR(CheckKeys(c, {"name", "share", "prompt_tokens", "output_tokens", "tier", "acceptance",
                                           "shared_prefix_tokens"}, where, source));
      if (!c["prompt_tokens"] || !c["output_tokens"])
        return InvalidField(where, "{}: {} needs prompt_tokens and output_tokens", source, where);
      control::WorkloadClass k;
      k.name = "class" + std::to_string(i);
      TARMAC_RETURN_IF_ERROR(Read(c, "name", where, source, &k.name));
      TARMAC_RETURN_IF_ERROR(Read(c, "share", where, source, &k.share));
      TARMAC_RETURN_IF_ERROR(Read(c, "prompt_tokens", where, source, &k.prompt_tokens));
      TARMAC_RETURN_IF_ERROR(Read(c, "output_tokens", where, source, &k.output_tokens));
      TARMAC_RETURN_IF_ERROR(Read(c, "tier", where, source, &k.tier));
      TARMAC_RETURN_IF_ERROR(Read(c, "acceptance", where, source, &k.acceptance));
      if (c["acceptance"] && k.acceptance < 0)
        return InvalidField(where + ".acceptance", "{}: {}.acceptance must be in [0, 1], got {}", source, where, k.acceptance);
      TARMAC_RETURN_IF_ERROR(Read(c, "shared_prefix_tokens", where, source, &k.shared_prefix_tokens));
      w.classes.push_back(std::move(k));
    }
  }
  if (Status st = w.Validate(); !st.ok()) return InvalidField(st.field(), "{}: {}", source, st.message());
  return w;
}

Result<control::PlanWorkload> LoadPlanWorkload(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidField("--workload", "--workload {}: cannot be read", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParsePlanWorkload(ss.str(), path);
}

}  // namespace tarmac::apps
