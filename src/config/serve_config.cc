#include "config/serve_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "config/cache_section.h"
#include "config/yaml_node.h"
#include "router/policy_argmin.h"

namespace tarmac::config {
namespace {

Status Bounds(const At& a, std::optional<int64_t>* lo, std::optional<int64_t>* hi) {
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"min", "max"}));
  if (a.has("min")) {
    TARMAC_ASSIGN_OR_RETURN(*lo, Integer(a.Key("min"), 0, int64_t{1} << 40));
  }
  if (a.has("max")) {
    TARMAC_ASSIGN_OR_RETURN(*hi, Integer(a.Key("max"), 0, int64_t{1} << 40));
  }
  if (*lo && *hi && **lo > **hi) return a.Error("min {} is above max {}", **lo, **hi);
  return Status::Ok();
}

Result<router::Condition> ParseCondition(const At& a) {
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"prompt_tokens", "max_tokens", "task", "sla", "tenant", "risk", "matches"}));
  router::Condition c;
  if (a.has("prompt_tokens")) TARMAC_RETURN_IF_ERROR(Bounds(a.Key("prompt_tokens"), &c.min_prompt_tokens, &c.max_prompt_tokens));
  if (a.has("max_tokens")) TARMAC_RETURN_IF_ERROR(Bounds(a.Key("max_tokens"), &c.min_max_tokens, &c.max_max_tokens));
  if (a.has("task")) {
    TARMAC_ASSIGN_OR_RETURN(c.tasks, Names(a.Key("task")));
  }
  if (a.has("sla")) {
    TARMAC_ASSIGN_OR_RETURN(c.slas, Names(a.Key("sla")));
  }
  if (a.has("tenant")) {
    TARMAC_ASSIGN_OR_RETURN(c.tenants, Names(a.Key("tenant")));
  }
  if (a.has("risk")) {
    TARMAC_ASSIGN_OR_RETURN(c.risk, RiskOf(a.Key("risk")));
  }
  if (a.has("matches")) {
    TARMAC_ASSIGN_OR_RETURN(std::string p, String(a.Key("matches")));
    auto pat = router::Pattern::Compile(p);
    if (!pat.ok()) return a.Key("matches").Error("{}", pat.status().message());
    c.last_user_matches = std::move(pat).value();
  }
  return c;
}

Result<router::CascadeParams> ParseCascade(const At& a) {
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"small", "large", "k", "min_mean_logprob", "min_margin", "mode"}));
  router::CascadeParams p;
  if (!a.has("small") || !a.has("large")) return a.Error("a cascade needs 'small' and 'large'");
  TARMAC_ASSIGN_OR_RETURN(p.small, ModelName(a.Key("small")));
  TARMAC_ASSIGN_OR_RETURN(p.large, ModelName(a.Key("large")));
  if (p.small == p.large) return a.Error("'small' and 'large' are the same model '{}'", p.small);
  if (a.has("k")) {
    TARMAC_ASSIGN_OR_RETURN(p.k, Integer(a.Key("k"), 1, 1024));
  }
  if (a.has("min_mean_logprob")) {
    TARMAC_ASSIGN_OR_RETURN(p.min_mean_logprob, Number(a.Key("min_mean_logprob")));
  }
  if (a.has("min_margin")) {
    TARMAC_ASSIGN_OR_RETURN(p.min_margin, Number(a.Key("min_margin")));
  }
  if (!a.has("min_mean_logprob") && !a.has("min_margin"))
    return a.Error("a cascade needs 'min_mean_logprob', 'min_margin' or both (the escalation thresholds)");
  if (a.has("mode")) {
    TARMAC_ASSIGN_OR_RETURN(std::string m, String(a.Key("mode")));
    if (m != "stream" && m != "full") return a.Key("mode").Error("mode must be 'stream' or 'full', got '{}'", m);
    p.full = m == "full";
  }
  return p;
}

Result<router::ArgminParams> ParseArgmin(const At& a) {
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"models", "lambda_cost", "lambda_latency", "lambda_quality", "explore", "decay", "seed"}));
  router::ArgminParams p;
  if (!a.has("models")) return a.Error("argmin needs 'models'");
  TARMAC_ASSIGN_OR_RETURN(p.models, Names(a.Key("models"), ModelName));
  auto weight = [&](const char* k, double* out) -> Status {
    if (!a.has(k)) return Status::Ok();
    TARMAC_ASSIGN_OR_RETURN(*out, Number(a.Key(k)));
    if (*out < 0) return a.Key(k).Error("must be >= 0, got {}", *out);
    return Status::Ok();
  };
  TARMAC_RETURN_IF_ERROR(weight("lambda_cost", &p.lambda_cost));
  TARMAC_RETURN_IF_ERROR(weight("lambda_latency", &p.lambda_latency));
  TARMAC_RETURN_IF_ERROR(weight("lambda_quality", &p.lambda_quality));
  TARMAC_RETURN_IF_ERROR(weight("explore", &p.explore));
  if (p.explore > 1) return a.Key("explore").Error("must be in [0, 1], got {}", p.explore);
  TARMAC_RETURN_IF_ERROR(weight("decay", &p.decay));
  if (a.has("decay") && !(p.decay > 0 && p.decay <= 1)) return a.Key("decay").Error("must be in (0, 1], got {}", p.decay);
  if (a.has("seed")) {
    TARMAC_ASSIGN_OR_RETURN(p.seed, Integer(a.Key("seed"), 0, INT64_MAX));
  }
  return p;
}

Result<std::unique_ptr<router::Policy>> ParsePolicy(const At& a, int depth) {
  if (depth > 16) return a.Error("policies nest deeper than 16 levels");
  if (a.node.IsScalar()) {
    TARMAC_ASSIGN_OR_RETURN(std::string m, ModelName(a));
    return std::unique_ptr<router::Policy>(std::make_unique<router::ModelPolicy>(m));
  }
  if (!a.node.IsMap() || a.node.size() == 0)
    return a.Error("expected a model name or one of rules / cascade / argmin / model, got {}", KindName(a.node));
  if (a.has("rules") || a.has("otherwise")) {
    TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"rules", "otherwise"}));
    std::vector<router::RulesPolicy::Rule> rules;
    if (a.has("rules")) {
      const At rs = a.Key("rules");
      if (!rs.node.IsSequence()) return rs.Error("expected a list of rules, got {}", KindName(rs.node));
      for (size_t i = 0; i < rs.node.size(); ++i) {
        const At r = rs.Index(i);
        TARMAC_RETURN_IF_ERROR(ExpectMap(r, {"when", "use"}));
        if (!r.has("use")) return r.Error("a rule needs 'use'");
        router::RulesPolicy::Rule rule;
        if (r.has("when")) {
          TARMAC_ASSIGN_OR_RETURN(rule.when, ParseCondition(r.Key("when")));
        }
        TARMAC_ASSIGN_OR_RETURN(rule.use, ParsePolicy(r.Key("use"), depth + 1));
        rules.push_back(std::move(rule));
      }
    }
    std::unique_ptr<router::Policy> otherwise;
    if (a.has("otherwise")) {
      TARMAC_ASSIGN_OR_RETURN(otherwise, ParsePolicy(a.Key("otherwise"), depth + 1));
    }
    return std::unique_ptr<router::Policy>(std::make_unique<router::RulesPolicy>(std::move(rules), std::move(otherwise)));
  }
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"cascade", "argmin", "model"}));
  if (a.node.size() != 1) return a.Error("give one of cascade / argmin / model");
  if (a.has("cascade")) {
    TARMAC_ASSIGN_OR_RETURN(router::CascadeParams p, ParseCascade(a.Key("cascade")));
    return std::unique_ptr<router::Policy>(std::make_unique<router::CascadePolicy>(std::move(p)));
  }
  if (a.has("argmin")) {
    TARMAC_ASSIGN_OR_RETURN(router::ArgminParams p, ParseArgmin(a.Key("argmin")));
    return std::unique_ptr<router::Policy>(std::make_unique<router::ArgminPolicy>(std::move(p)));
  }
  TARMAC_ASSIGN_OR_RETURN(std::string m, ModelName(a.Key("model")));
  return std::unique_ptr<router::Policy>(std::make_unique<router::ModelPolicy>(m));
}

Result<ModelEntry> ParseModel(const At& a) {
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"path", "name", "tier", "price_per_1k", "threads", "cpus", "allowed_risk",
                                       "allowed_sla", "max_concurrent", "max_queue", "cache_responses"}));
  ModelEntry m;
  if (!a.has("path")) return a.Error("a model needs 'path'");
  TARMAC_ASSIGN_OR_RETURN(m.path, String(a.Key("path")));
  if (a.has("name")) {
    TARMAC_ASSIGN_OR_RETURN(m.info.name, Name(a.Key("name")));
  } else {
    m.info.name = std::filesystem::path(m.path).stem().string();
  }
  if (a.has("tier")) {
    TARMAC_ASSIGN_OR_RETURN(m.info.tier, Name(a.Key("tier")));
  }
  if (a.has("price_per_1k")) {
    const At p = a.Key("price_per_1k");
    if (!(p.node.IsScalar() && p.node.Scalar() == "measured")) {
      TARMAC_ASSIGN_OR_RETURN(double v, Number(p));
      if (v < 0) return p.Error("must be >= 0 or \"measured\", got {}", v);
      m.info.price_per_1k = v;
    }
  }
  if (a.has("threads")) {
    TARMAC_ASSIGN_OR_RETURN(m.threads, Integer(a.Key("threads"), 1, 256));
  }
  if (a.has("cpus")) {
    const At c = a.Key("cpus");
    if (!c.node.IsSequence() || c.node.size() == 0) return c.Error("expected a non-empty list of CPU ids");
    for (size_t i = 0; i < c.node.size(); ++i) {
      TARMAC_ASSIGN_OR_RETURN(int64_t id, Integer(c.Index(i), 0, 4095));
      m.cpus.push_back(static_cast<int>(id));
    }
  }
  if (a.has("allowed_risk")) {
    const At r = a.Key("allowed_risk");
    if (!r.node.IsSequence() || r.node.size() == 0) return r.Error("expected a non-empty list of risk levels");
    m.info.allowed_risk.clear();
    for (size_t i = 0; i < r.node.size(); ++i) {
      TARMAC_ASSIGN_OR_RETURN(metrics::Risk k, RiskOf(r.Index(i)));
      m.info.allowed_risk.push_back(k);
    }
  }
  if (a.has("allowed_sla")) {
    TARMAC_ASSIGN_OR_RETURN(m.info.allowed_sla, Names(a.Key("allowed_sla")));
  }
  if (a.has("max_concurrent")) {
    TARMAC_ASSIGN_OR_RETURN(m.max_concurrent, Integer(a.Key("max_concurrent"), 1, 1 << 20));
  }
  if (a.has("max_queue")) {
    TARMAC_ASSIGN_OR_RETURN(m.max_queue, Integer(a.Key("max_queue"), 0, 1 << 24));
  }
  if (a.has("cache_responses")) {
    TARMAC_ASSIGN_OR_RETURN(m.cache_responses, ParseCacheResponses(a.Key("cache_responses")));
  }
  return m;
}

Result<TenantEntry> ParseTenant(const At& a) {
  TARMAC_RETURN_IF_ERROR(ExpectMap(a, {"name", "api_key_file", "sla", "risk", "scopes", "policy_version", "session_max_blocks",
                                       "max_concurrent", "tokens_per_s", "token_burst"}));
  TenantEntry t;
  if (!a.has("name")) return a.Error("a tenant needs 'name'");
  TARMAC_ASSIGN_OR_RETURN(t.name, Name(a.Key("name")));
  if (a.has("api_key_file")) {
    TARMAC_ASSIGN_OR_RETURN(t.api_key_file, String(a.Key("api_key_file")));
  }
  if (a.has("sla")) {
    TARMAC_ASSIGN_OR_RETURN(t.sla, Name(a.Key("sla")));
  }
  if (a.has("risk")) {
    TARMAC_ASSIGN_OR_RETURN(t.risk, RiskOf(a.Key("risk")));
  }
  if (a.has("scopes")) {
    const At s = a.Key("scopes");
    if (!s.node.IsSequence()) return s.Error("expected a list of scopes");
    for (size_t i = 0; i < s.node.size(); ++i) {
      TARMAC_ASSIGN_OR_RETURN(std::string v, String(s.Index(i)));
      t.scopes.push_back(std::move(v));
    }
  }
  if (a.has("policy_version")) {
    TARMAC_ASSIGN_OR_RETURN(t.policy_version, String(a.Key("policy_version")));
  }
  if (a.has("session_max_blocks")) {
    TARMAC_ASSIGN_OR_RETURN(t.session_max_blocks, Integer(a.Key("session_max_blocks"), 1, int64_t{1} << 30));
  }
  if (a.has("max_concurrent")) {
    TARMAC_ASSIGN_OR_RETURN(int64_t n, Integer(a.Key("max_concurrent"), 0, 1 << 20));
    t.max_concurrent = static_cast<int32_t>(n);
  }
  for (const char* k : {"tokens_per_s", "token_burst"}) {
    if (!a.has(k)) continue;
    TARMAC_ASSIGN_OR_RETURN(double v, Number(a.Key(k)));
    if (!(v >= 0) || v > 1e12) return a.Key(k).Error("expected a number of tokens >= 0 (0: no limit)");
    (std::string_view(k) == "tokens_per_s" ? t.tokens_per_s : t.token_burst) = v;
  }
  if (t.token_burst && !t.tokens_per_s) return a.Key("token_burst").Error("token_burst needs tokens_per_s");
  return t;
}

Status ParseSlos(const At& a, control::SloTargets* out) {
  if (!a.node.IsMap()) return a.Error("expected a map of tier -> {{ttft_ms, tpot_ms}}");
  for (const auto& kv : a.node) {
    const std::string tier = kv.first.as<std::string>("");
    const At t = a.Key(tier);
    TARMAC_RETURN_IF_ERROR(ExpectMap(t, {"ttft_ms", "tpot_ms"}));
    control::TierSlo e;
    TARMAC_ASSIGN_OR_RETURN(e.name, Name(At{kv.first, t.path, a.origin}));
    // The controller and the report judge a tier on both targets: neither has a default.
    if (!t.has("ttft_ms") || !t.has("tpot_ms")) return t.Error("give both ttft_ms and tpot_ms");
    TARMAC_ASSIGN_OR_RETURN(e.ttft_ms, Number(t.Key("ttft_ms")));
    TARMAC_ASSIGN_OR_RETURN(e.tpot_ms, Number(t.Key("tpot_ms")));
    if (!(e.ttft_ms > 0)) return t.Key("ttft_ms").Error("must be > 0 ms");
    if (!(e.tpot_ms > 0)) return t.Key("tpot_ms").Error("must be > 0 ms");
    if (Status st = out->Add(std::move(e)); !st.ok()) return t.Error("{}", st.message());
  }
  return Status::Ok();
}

Status ParseTaskRules(const At& a, std::vector<router::TaskRule>* out) {
  if (!a.node.IsSequence()) return a.Error("expected a list of {{match, task and/or risk}}");
  for (size_t i = 0; i < a.node.size(); ++i) {
    const At r = a.Index(i);
    TARMAC_RETURN_IF_ERROR(ExpectMap(r, {"match", "task", "risk"}));
    if (!r.has("match")) return r.Error("a task rule needs 'match'");
    if (!r.has("task") && !r.has("risk")) return r.Error("a task rule sets 'task', 'risk' or both");
    TARMAC_ASSIGN_OR_RETURN(std::string p, String(r.Key("match")));
    auto pat = router::Pattern::Compile(p);
    if (!pat.ok()) return r.Key("match").Error("{}", pat.status().message());
    router::TaskRule rule{std::move(pat).value(), std::nullopt, std::nullopt};
    if (r.has("task")) {
      TARMAC_ASSIGN_OR_RETURN(rule.task, Name(r.Key("task")));
    }
    if (r.has("risk")) {
      TARMAC_ASSIGN_OR_RETURN(rule.risk, RiskOf(r.Key("risk")));
    }
    out->push_back(std::move(rule));
  }
  return Status::Ok();
}

Status ParseRoutes(const At& a, std::vector<router::RouteConfig>* out,
                   std::map<std::string, std::optional<double>>* cached) {
  if (!a.node.IsSequence() || a.node.size() == 0) return a.Error("expected a non-empty list of routes");
  for (size_t i = 0; i < a.node.size(); ++i) {
    const At r = a.Index(i);
    TARMAC_RETURN_IF_ERROR(ExpectMap(r, {"name", "baseline", "policy", "cache_responses"}));
    if (!r.has("name") || !r.has("baseline")) return r.Error("a route needs 'name' and 'baseline'");
    router::RouteConfig rc;
    TARMAC_ASSIGN_OR_RETURN(rc.name, Name(r.Key("name")));
    TARMAC_ASSIGN_OR_RETURN(rc.baseline, Name(r.Key("baseline")));
    if (r.has("policy")) {
      TARMAC_ASSIGN_OR_RETURN(rc.policy, ParsePolicy(r.Key("policy"), 0));
    }
    if (r.has("cache_responses")) {
      TARMAC_ASSIGN_OR_RETURN(auto ttl, ParseCacheResponses(r.Key("cache_responses")));
      if (ttl) (*cached)[rc.name] = *ttl;
    }
    out->push_back(std::move(rc));
  }
  return Status::Ok();
}

// Names a config refers to exist and are unique.
Status CrossCheck(const ServeConfig& c, const std::string& origin) {
  std::set<std::string> models, tenants;
  for (size_t i = 0; i < c.models.size(); ++i)
    if (!models.insert(c.models[i].info.name).second)
      return InvalidField(fmt::format("models[{}].name", i), "{}: models[{}].name: two models are named '{}'", origin, i,
                          c.models[i].info.name);
  for (size_t i = 0; i < c.tenants.size(); ++i)
    if (!tenants.insert(c.tenants[i].name).second)
      return InvalidField(fmt::format("tenants[{}].name", i), "{}: tenants[{}].name: tenant '{}' is defined twice", origin,
                          i, c.tenants[i].name);
  for (size_t i = 0; i < c.router.routes.size(); ++i) {
    const router::RouteConfig& r = c.router.routes[i];
    const std::string path = fmt::format("routes[{}]", i);
    if (models.count(r.name))
      return InvalidField(path + ".name", "{}: {}.name: route '{}' has the name of a model", origin, path, r.name);
    if (!models.count(r.baseline))
      return InvalidField(path + ".baseline", "{}: {}.baseline: '{}' is not one of the models", origin, path, r.baseline);
    for (size_t k = 0; k < i; ++k)
      if (c.router.routes[k].name == r.name)
        return InvalidField(path + ".name", "{}: {}.name: route '{}' is defined twice", origin, path, r.name);
  }
  return Status::Ok();
}

}  // namespace

const TenantEntry* ServeConfig::tenant(std::string_view name) const {
  for (const TenantEntry& t : tenants)
    if (t.name == name) return &t;
  return nullptr;
}

Result<ServeConfig> ParseServeConfig(std::string_view yaml, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("{}: not valid YAML at line {}, column {}: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  const At top{root, "", &origin};
  if (root.IsNull()) return top.Error("the file is empty; it needs at least 'models'");
  TARMAC_RETURN_IF_ERROR(
      ExpectMap(top, {"models", "api_key_file", "tenants", "slos", "default_task", "task_rules", "routes", "cache"}));
  ServeConfig c;
  if (!top.has("models")) return top.Error("'models' is required (at least one model)");
  const At ms = top.Key("models");
  if (!ms.node.IsSequence() || ms.node.size() == 0) return ms.Error("expected a non-empty list of models");
  for (size_t i = 0; i < ms.node.size(); ++i) {
    TARMAC_ASSIGN_OR_RETURN(ModelEntry m, ParseModel(ms.Index(i)));
    if (m.cache_responses) c.cached_responses[m.info.name] = *m.cache_responses;
    c.router.models.push_back(m.info);
    c.models.push_back(std::move(m));
  }
  if (top.has("api_key_file")) {
    TARMAC_ASSIGN_OR_RETURN(c.api_key_file, String(top.Key("api_key_file")));
  }
  if (top.has("tenants")) {
    const At ts = top.Key("tenants");
    if (!ts.node.IsSequence()) return ts.Error("expected a list of tenants");
    for (size_t i = 0; i < ts.node.size(); ++i) {
      TARMAC_ASSIGN_OR_RETURN(TenantEntry t, ParseTenant(ts.Index(i)));
      c.tenants.push_back(std::move(t));
    }
  }
  if (top.has("slos")) TARMAC_RETURN_IF_ERROR(ParseSlos(top.Key("slos"), &c.slos));
  if (top.has("default_task")) {
    TARMAC_ASSIGN_OR_RETURN(c.router.default_task, Name(top.Key("default_task")));
  }
  if (top.has("cache")) TARMAC_RETURN_IF_ERROR(ParseCacheSection(top.Key("cache"), &c.cache, &c.cache_secret_file));
  if (top.has("task_rules")) TARMAC_RETURN_IF_ERROR(ParseTaskRules(top.Key("task_rules"), &c.router.task_rules));
  std::set<std::string> names;
  for (const ModelEntry& m : c.models) names.insert(m.info.name);
  if (top.has("routes")) {
    At routes = top.Key("routes");
    routes.models = &names;
    TARMAC_RETURN_IF_ERROR(ParseRoutes(routes, &c.router.routes, &c.cached_responses));
  }
  TARMAC_RETURN_IF_ERROR(CrossCheck(c, origin));
  return c;
}

Result<ServeConfig> LoadServeConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("--config {}: cannot read the file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseServeConfig(ss.str(), path);
}

}  // namespace tarmac::config
