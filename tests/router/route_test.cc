// Routes over real engines: rules never let a forbidden model serve a request (fallback
// included) over 100,000 random requests, half of them prepared in the server's steps (Probe,
// Decide, Prepare; some probes and prepares on another thread); the cascade with thresholds
// forced high escalates every request and answers as the large model would, forced low as the
// small one would; cancelling during the held-back tokens frees both engines' blocks; feedback
// and implicit scores move the argmin's estimates.
#include <gtest/gtest.h>

#include <future>
#include <random>
#include <set>
#include <thread>

#include "common/test_util.h"
#include "engine/engine_test_util.h"
#include "metrics/registry.h"
#include "router/policy_argmin.h"
#include "router/route_target.h"

namespace tarmac::router {
namespace {

using Risk = metrics::Risk;

std::unique_ptr<PoolModel> Make(const std::string& name, const std::string& path,
                                std::shared_ptr<metrics::Registry> reg, int32_t blocks = 64) {
  testing::LoadedModel& m = testing::CachedModel(path);
  engine::EngineConfig cfg;
  cfg.kv.blocks = blocks;
  cfg.warmup = false;
  cfg.metrics = std::move(reg);
  return std::move(PoolModel::Create(name, m.model.get(), m.tok.get(), cfg).value());
}

GenerationSpec Ids(int32_t n, int32_t max_tokens) {
  GenerationSpec s;
  PromptInput p;
  p.is_ids = true;
  for (int32_t i = 0; i < n; ++i) p.ids.push_back(10 + (i * 13) % 1000);
  s.prompts.push_back(std::move(p));
  s.max_tokens = max_tokens;
  s.sampling.temperature = 0.0f;
  s.ignore_eos = true;
  return s;
}

struct Pool {
  std::shared_ptr<metrics::Registry> reg = std::make_shared<metrics::Registry>();
  ModelPool pool{{256, 1024, 1 << 22}, reg};
};

// The model infos the rule test's router gets, and the same rules checked independently.
std::vector<ModelInfo> Infos() {
  ModelInfo small{"small", "small", 0.01, {Risk::kLow}, {"standard", "bronze"}};
  ModelInfo mid{"mid", "mid", 0.05, {Risk::kLow, Risk::kHigh}, {"gold"}};
  ModelInfo large{"large", "large", 0.2, {Risk::kLow, Risk::kHigh}, {}};
  return {small, mid, large};
}

bool Permitted(const std::string& model, Risk risk, const std::string& sla) {
  for (const ModelInfo& i : Infos()) {
    if (i.name != model) continue;
    const bool risk_ok = std::find(i.allowed_risk.begin(), i.allowed_risk.end(), risk) != i.allowed_risk.end();
    const bool sla_ok = i.allowed_sla.empty() || std::find(i.allowed_sla.begin(), i.allowed_sla.end(), sla) != i.allowed_sla.end();
    return risk_ok && sla_ok;
  }
  return false;
}

std::unique_ptr<Policy> RandomRules(std::mt19937_64& rng) {
  const std::vector<std::string> models = {"small", "mid", "large"};
  const std::vector<std::string> tasks = {"chat", "qa", "code"}, slas = {"standard", "gold", "bronze"};
  std::vector<RulesPolicy::Rule> rules;
  for (int i = 0; i < 8; ++i) {
    RulesPolicy::Rule r;
    if (rng() % 2) r.when.max_prompt_tokens = static_cast<int64_t>(rng() % 60);
    if (rng() % 3 == 0) r.when.tasks = {tasks[rng() % 3]};
    if (rng() % 3 == 0) r.when.slas = {slas[rng() % 3]};
    if (rng() % 3 == 0) r.when.risk = rng() % 2 ? Risk::kHigh : Risk::kLow;
    switch (rng() % 3) {
      case 0: r.use = std::make_unique<ModelPolicy>(models[rng() % 3]); break;
      case 1: {
        CascadeParams p;
        p.small = models[rng() % 2];
        p.large = "large";
        p.min_mean_logprob = -1.0;
        r.use = std::make_unique<CascadePolicy>(p);
        break;
      }
      default: {
        ArgminParams a;
        a.models = models;
        a.seed = rng();
        r.use = std::make_unique<ArgminPolicy>(a);
      }
    }
    rules.push_back(std::move(r));
  }
  return std::make_unique<RulesPolicy>(std::move(rules), std::make_unique<ModelPolicy>(models[rng() % 3]));
}

TEST(Router, NoRequestIsServedByAModelItsRiskOrTierForbids) {
  Pool p;
  for (const char* name : {"small", "mid", "large"}) p.pool.Add(Make(name, testing::kWp1m, p.reg, 16));
  std::mt19937_64 rng(2024);
  RouterConfig rc;
  rc.models = Infos();
  for (int r = 0; r < 4; ++r) {
    RouteConfig route;
    route.name = "route" + std::to_string(r);
    route.policy = RandomRules(rng);
    route.baseline = r == 3 ? "mid" : "large";  // mid forbids most tiers: some requests have no model at all
    rc.routes.push_back(std::move(route));
  }
  Router router(std::move(rc), &p.pool, p.reg);
  ASSERT_TRUE(router.Validate().ok()) << router.Validate().message();
  const std::vector<std::string> tasks = {"chat", "qa", "code", ""}, slas = {"standard", "gold", "bronze", ""};
  std::map<std::string, int> served;
  int violations = 0, refused = 0, fallbacks = 0;
  for (int i = 0; i < 100000; ++i) {
    GenerationSpec s = Ids(1 + static_cast<int32_t>(rng() % 80), 1 + static_cast<int32_t>(rng() % 8));
    s.task = tasks[rng() % 4];
    s.sla = slas[rng() % 4];
    s.risk = rng() % 3 == 0 ? Risk::kHigh : Risk::kLow;
    s.risk_given = true;
    auto t = router.MakeTarget("route" + std::to_string(rng() % 4), "t");
    Result<PreparedRequests> prep = Status(StatusCode::kInternal, "unset");
    if (i % 2 == 0) {
      prep = t->Prepare(s);
    } else {  // in steps, as the server does: Probe and Prepare may run on another thread
      EXPECT_TRUE(t->needs_decision());
      const bool other_thread = i % 100 == 1;
      auto probe = other_thread ? std::async(std::launch::async, [&] { return t->Probe(s); }).get() : t->Probe(s);
      Status d = probe.ok() ? t->Decide(s, *probe) : probe.status();
      if (d.ok()) {
        EXPECT_FALSE(t->needs_decision());
        prep = other_thread ? std::async(std::launch::async, [&] { return t->Prepare(s); }).get() : t->Prepare(s);
      } else {
        prep = d;
      }
    }
    const std::string sla = s.sla.empty() ? "standard" : s.sla;
    if (prep.ok() && rng() % 5 == 0) {  // its admission refused it: the fallback must obey too
      if (t->Fallback("test").ok()) {
        ++fallbacks;
        prep = t->Prepare(s);
      } else {
        prep = Status(StatusCode::kResourceExhausted, "no fallback");
      }
    }
    if (!prep.ok()) {
      ++refused;
      continue;
    }
    const std::string model = t->model().name;
    ++served[model];
    if (!Permitted(model, s.risk, sla)) ++violations;
  }
  EXPECT_EQ(violations, 0);
  EXPECT_GT(refused, 0);
  EXPECT_GT(fallbacks, 1000);
  for (const char* m : {"small", "mid", "large"}) EXPECT_GT(served[m], 1000) << m;
}

// The controller's "route to a smaller model": while a model is degraded, routed requests of
// the lowest tiers that the policy sends to it go to the route's largest smaller model that may
// serve them (never a forbidden one), other tiers stay; off again, everything is as before.
TEST(Router, ADegradedModelSendsTheLowestTiersToASmallerModelOfTheRoute) {
  Pool p;
  p.pool.Add(Make("small", testing::kWp1m, p.reg, 16));
  p.pool.Add(Make("large", testing::kWp11m, p.reg, 16));
  p.pool.Add(Make("other", testing::kWp1m, p.reg, 16));  // on no route
  RouterConfig rc;
  ModelInfo small{"small", "small", 0.01, {Risk::kLow}, {}};  // low risk only
  rc.models = {small};
  RouteConfig r;
  r.name = "auto";
  std::vector<RulesPolicy::Rule> rules;
  RulesPolicy::Rule rule;
  rule.when.max_prompt_tokens = 1;  // never matches: the small model is on the route, unused
  rule.use = std::make_unique<ModelPolicy>("small");
  rules.push_back(std::move(rule));
  r.policy = std::make_unique<RulesPolicy>(std::move(rules), std::make_unique<ModelPolicy>("large"));
  r.baseline = "large";
  rc.routes.push_back(std::move(r));
  RouteConfig direct;  // a route with the large model only
  direct.name = "only-large";
  direct.baseline = "large";
  rc.routes.push_back(std::move(direct));
  Router router(std::move(rc), &p.pool, p.reg);
  ASSERT_TRUE(router.Validate().ok()) << router.Validate().message();
  EXPECT_TRUE(router.HasSmallerModel("large"));
  EXPECT_FALSE(router.HasSmallerModel("small"));
  EXPECT_FALSE(router.HasSmallerModel("other"));
  router.SetLowestTiers([](std::string_view sla) { return sla == "bronze"; });
  auto answer = [&](const std::string& route, const std::string& sla, Risk risk, bool* degraded) {
    GenerationSpec s = Ids(8, 2);
    s.sla = sla;
    s.risk = risk;
    s.risk_given = true;
    auto t = router.MakeTarget(route, "t");
    auto prep = t->Prepare(s);
    EXPECT_TRUE(prep.ok()) << prep.status().message();
    *degraded = t->route_info()->degraded;
    return t->model().name;
  };
  bool d = true;
  EXPECT_EQ(answer("auto", "bronze", Risk::kLow, &d), "large");  // not degraded yet
  EXPECT_FALSE(d);
  router.SetRouteSmaller("large", true);
  EXPECT_EQ(answer("auto", "bronze", Risk::kLow, &d), "small");
  EXPECT_TRUE(d);
  EXPECT_EQ(answer("auto", "gold", Risk::kLow, &d), "large");  // not a lowest tier
  EXPECT_FALSE(d);
  EXPECT_EQ(answer("auto", "bronze", Risk::kHigh, &d), "large");  // small may not serve high risk
  EXPECT_FALSE(d);
  EXPECT_EQ(answer("only-large", "bronze", Risk::kLow, &d), "large");  // its route has nothing smaller
  EXPECT_FALSE(d);
  router.SetRouteSmaller("large", false);
  EXPECT_EQ(answer("auto", "bronze", Risk::kLow, &d), "large");
  EXPECT_FALSE(d);
}

// Runs a target to its end; the tokens of choice 0.
std::vector<int32_t> RunToEnd(Target& t, const GenerationSpec& spec) {
  auto p = t.Prepare(spec);
  EXPECT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(t.Start(std::move(p).value(), [] {}).ok());
  std::vector<int32_t> out;
  engine::TokenEvent ev;
  for (int spin = 0; spin < 200000; ++spin) {
    bool last = false;
    while (t.Next(0, &ev)) {
      if (ev.token >= 0) out.push_back(ev.token);
      last = ev.last();
      if (last) break;
    }
    if (last) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return out;
}

TEST(Cascade, ThresholdsForcedHighOrLowAnswerAsTheLargeOrTheSmallModel) {
  Pool p;
  p.pool.Add(Make("small", testing::kWp1m, p.reg));
  p.pool.Add(Make("large", testing::kWp11m, p.reg));
  PoolModel* small = p.pool.Find("small");
  PoolModel* large = p.pool.Find("large");
  for (int prompt = 0; prompt < 4; ++prompt) {
    GenerationSpec s = Ids(5 + 7 * prompt, 20);
    EngineTarget a(small), b(large);
    const std::vector<int32_t> small_answer = RunToEnd(a, s), large_answer = RunToEnd(b, s);
    ASSERT_EQ(small_answer.size(), 20u);
    CascadeParams high{"small", "large", 8, 1e9, -1e9, false};   // nothing is that confident
    CascadeParams low{"small", "large", 8, -1e9, -1e9, false};
    CascadeTarget escalating(small, large, high), keeping(small, large, low);
    EXPECT_EQ(RunToEnd(escalating, s), large_answer) << prompt;
    EXPECT_TRUE(escalating.escalated());
    EXPECT_EQ(escalating.model().name, "large");
    EXPECT_EQ(RunToEnd(keeping, s), small_answer) << prompt;
    EXPECT_FALSE(keeping.escalated());
    // Full mode decides on the whole answer, the same way.
    CascadeParams full_high = high;
    full_high.full = true;
    CascadeTarget full(small, large, full_high);
    EXPECT_EQ(RunToEnd(full, s), large_answer);
  }
}

TEST(Cascade, AlternativesTheClientDidNotAskForAreTrimmed) {
  Pool p;
  p.pool.Add(Make("small", testing::kWp1m, p.reg));
  p.pool.Add(Make("large", testing::kWp11m, p.reg));
  CascadeTarget t(p.pool.Find("small"), p.pool.Find("large"), {"small", "large", 4, -1e9, -1e9, false});
  GenerationSpec s = Ids(6, 10);
  s.sampling.top_logprobs = 1;
  auto prep = t.Prepare(s);
  ASSERT_TRUE(prep.ok());
  EXPECT_EQ(prep->requests[0].request().sampling.top_logprobs, 2);  // the margin needs two
  ASSERT_TRUE(t.Start(std::move(prep).value(), [] {}).ok());
  engine::TokenEvent ev;
  int tokens = 0;
  for (int spin = 0; spin < 100000 && tokens < 10; ++spin) {
    while (t.Next(0, &ev)) {
      if (ev.token < 0) continue;
      ++tokens;
      EXPECT_EQ(ev.top.size(), 1u);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_EQ(tokens, 10);
}

TEST(Cascade, CancelDuringTheHeldBackTokensFreesBothEngines) {
  Pool p;
  p.pool.Add(Make("small", testing::kWp1m, p.reg));
  p.pool.Add(Make("large", testing::kWp11m, p.reg));
  PoolModel* small = p.pool.Find("small");
  PoolModel* large = p.pool.Find("large");
  for (bool escalate : {false, true}) {
    // k close to the whole answer: the cancel comes while the tokens are still held back.
    CascadeTarget t(small, large, {"small", "large", 280, escalate ? 1e9 : -1e9, -1e9, false});
    auto prep = t.Prepare(Ids(9, 300));
    ASSERT_TRUE(prep.ok());
    ASSERT_TRUE(t.Start(std::move(prep).value(), [] {}).ok());
    engine::TokenEvent ev;
    t.Cancel();
    bool last = false;
    for (int spin = 0; spin < 100000 && !last; ++spin) {
      while (t.Next(0, &ev)) last = ev.last();
      if (!last) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    EXPECT_TRUE(last);
    for (int i = 0; i < 400 && (small->engine->Stats().kv.request_blocks != 0 || large->engine->Stats().kv.request_blocks != 0);
         ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(small->engine->Stats().kv.request_blocks, 0);
    EXPECT_EQ(large->engine->Stats().kv.request_blocks, 0);
  }
}

TEST(Argmin, FeedbackMovesTheEstimatesAndTheChoice) {
  // A view where both models cost the same and are equally fast: quality decides.
  struct View : ModelView {
    bool Exists(const std::string&) const override { return true; }
    bool Allowed(const std::string&, const RouteFeatures&) const override { return true; }
    double PredictLatency(const std::string&, const RouteFeatures&) const override { return 0.1; }
    double Cost(const std::string&, const RouteFeatures&) const override { return 1.0; }
  } view;
  ArgminParams a;
  a.models = {"a", "b"};
  a.explore = 0;
  ArgminPolicy p(a);
  RouteFeatures f;
  f.bucket = 3;
  EXPECT_DOUBLE_EQ(p.QualityMean(3, "a"), 0.5);
  for (int i = 0; i < 60; ++i) {
    p.Observe(3, "a", 0.1);
    p.Observe(3, "b", 0.9);
  }
  EXPECT_LT(p.QualityMean(3, "a"), 0.2);
  EXPECT_GT(p.QualityMean(3, "b"), 0.8);
  int b = 0;
  for (int i = 0; i < 200; ++i) b += p.Decide(f, view).model == "b";
  EXPECT_GT(b, 190);
  // The estimates follow a shift (decay), and another bucket is untouched.
  for (int i = 0; i < 300; ++i) {
    p.Observe(3, "a", 0.95);
    p.Observe(3, "b", 0.05);
  }
  b = 0;
  for (int i = 0; i < 200; ++i) b += p.Decide(f, view).model == "b";
  EXPECT_LT(b, 10);
  EXPECT_DOUBLE_EQ(p.QualityMean(4, "a"), 0.5);
}

}  // namespace
}  // namespace tarmac::router
