// Routing decision latency (issue 19: <= 50 us at p99): a route's policy deciding over a pool of
// two real engines (wp-1m loaded twice, idle), the features already computed. Each iteration
// times one decision; the p50 / p99 / max counters are over all iterations.
//   build/bin/bench_router [--benchmark_repetitions=3]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "base/clock.h"
#include "model/llama_model.h"
#include "router/policy_argmin.h"
#include "router/router.h"
#include "tokenizer/vocab_gguf.h"

namespace tarmac::router {
namespace {

struct World {
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<tok::Tokenizer> tok;
  std::shared_ptr<metrics::Registry> reg = std::make_shared<metrics::Registry>();
  std::unique_ptr<ModelPool> pool;
  std::unique_ptr<Router> router;
  World() {
    model = std::move(model::LlamaModel::Load(TARMAC_SOURCE_DIR "/models/wp-1m-f16.gguf").value());
    tok = std::move(tok::Tokenizer::Create(tok::LoadVocab(model->file()).value()).value());
    pool = std::make_unique<ModelPool>(AdmissionLimits{}, reg);
    for (const char* name : {"small", "large"}) {
      engine::EngineConfig c;
      c.kv.blocks = 16;
      c.warmup = false;
      c.metrics = reg;
      pool->Add(std::move(PoolModel::Create(name, model.get(), tok.get(), c).value()));
    }
    RouterConfig rc;
    rc.models = {ModelInfo{"small", "small", 0.01, {metrics::Risk::kLow}, {}},
                 ModelInfo{"large", "large", std::nullopt, {metrics::Risk::kLow, metrics::Risk::kHigh}, {}}};
    router = std::make_unique<Router>(std::move(rc), pool.get(), reg);
  }
};

World& Get() {
  static World w;
  return w;
}

std::unique_ptr<Policy> MakePolicy(int kind) {
  ArgminParams a;
  a.models = {"small", "large"};
  if (kind == 0) return std::make_unique<ArgminPolicy>(a);
  CascadeParams c{"small", "large", 8, -2.0, 0.1, false};
  std::vector<RulesPolicy::Rule> rules;
  for (int i = 0; i < 8; ++i) {  // eight rules that do not match, then the leaf that does
    RulesPolicy::Rule r;
    r.when.tasks = {"task" + std::to_string(i)};
    r.when.max_prompt_tokens = 10;
    r.use = std::make_unique<ModelPolicy>("large");
    rules.push_back(std::move(r));
  }
  RulesPolicy::Rule last;
  last.when.last_user_matches = std::move(Pattern::Compile("(?i)prince|natasha").value());
  last.use = kind == 1 ? std::unique_ptr<Policy>(std::make_unique<CascadePolicy>(c)) : std::make_unique<ArgminPolicy>(a);
  rules.push_back(std::move(last));
  return std::make_unique<RulesPolicy>(std::move(rules), std::make_unique<ModelPolicy>("large"));
}

void BM_RouteDecision(benchmark::State& state) {
  World& w = Get();
  std::unique_ptr<Policy> policy = MakePolicy(static_cast<int>(state.range(0)));
  RouteFeatures f;
  f.prompt_tokens = 128;
  f.max_tokens = 32;
  f.task = "chat";
  f.sla = "standard";
  f.last_user_message = "Tell me what Prince Andrew thought of Natasha at the ball, and why he left for the army.";
  metrics::RequestFeatures bf;
  bf.prompt_tokens = 128;
  bf.max_tokens = 32;
  f.bucket = w.reg->buckets().Of(bf);
  std::vector<double> ns;
  ns.reserve(1 << 20);
  for (auto _ : state) {
    const int64_t t0 = NowNanos();
    Decision d = policy->Decide(f, *w.router);
    ns.push_back(static_cast<double>(NowNanos() - t0));
    benchmark::DoNotOptimize(d);
    policy->Observe(f.bucket, d.model, 0.5);
  }
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) { return ns[static_cast<size_t>(q * static_cast<double>(ns.size() - 1))]; };
  state.counters["p50_us"] = at(0.5) / 1e3;
  state.counters["p99_us"] = at(0.99) / 1e3;
  state.counters["max_us"] = ns.back() / 1e3;
}
// 0: argmin alone; 1: rules (nine conditions, a pattern) ending in a cascade; 2: ... in argmin.
BENCHMARK(BM_RouteDecision)->Arg(0)->Arg(1)->Arg(2)->Iterations(100000);

}  // namespace
}  // namespace tarmac::router

BENCHMARK_MAIN();
